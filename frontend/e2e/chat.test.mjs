// End-to-end: the real app binary in browser mode (the same services the window binds, over HTTP
// and server-sent events) driven by headless Debian Chromium through playwright-core.
//
//   VKLLM_APP=../build/bin/vkllm-app node --test e2e/
//
// VKLLM_APP is the app binary (default ../build/bin/vkllm-app). Each run uses a fresh data dir, so the
// conversation it finds after a reload and after a restart is the one it wrote.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { appBin, openBrowser, startApp, stopApp, closeApp } from "./browser-app.mjs";

const here = new URL(".", import.meta.url).pathname;


const dataDir = mkdtempSync(join(tmpdir(), "vkllm-e2e-data-"));
const profileDir = mkdtempSync(join(tmpdir(), "vkllm-e2e-chromium-"));
let server; // { proc, url }
let context;
let page;


before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  server = await startApp(dataDir);
  ({ context, page } = await openBrowser(profileDir));
});

after(() => closeApp(context, server, dataDir, profileDir));

const prompt = "Once upon a time";
let reply = "";

// Whatever the device, the placement is the plan's: on the GPU the header names vulkan, on the
// CPU it says why, and never that the app was built without its GPU backend (gpu.test.mjs pins
// VRAM so the plan arms and requires resident).
test("the header names the loaded model and its placement, and on the CPU why", async () => {
  await page.goto(server.url);
  await page.locator("#model-name").waitFor();
  assert.match(await page.locator("#model-name").innerText(), /\S/);
  const placement = (await page.locator("#model-placement").innerText()).trim();
  const badge = await page.locator("#model-badge").innerText();
  if (placement === "cpu") {
    const reason = (await page.locator("#cpu-reason").innerText()).trim();
    assert.match(reason, /^On the CPU: (the app was started|the engine was started|the GPU|no Vulkan (device|runtime) found|the model needs \d+ MB of GPU memory)/);
    assert.doesNotMatch(reason, /no GPU support/, "the app is built without its Vulkan backend");
    assert.doesNotMatch(reason, /VKLLM_|--/, "the header names a CLI setting");
  } else {
    assert.match(placement, /^(resident|split \d+ of \d+)$/);
    assert.match(badge, /\bvulkan\b/);
  }
});

// Under LANG=C (or no LANG: containers, CI) WebKitGTK reports navigator.language as "C", which
// Intl refuses; uPlot formats with it when its module loads, and the window stayed blank. The
// page here is told the same and must still draw, with no page error.
test("the page draws when the browser reports the POSIX locale C as its language", async () => {
  const cPage = await context.newPage();
  const errors = [];
  cPage.on("pageerror", (e) => errors.push(e.message));
  await cPage.addInitScript(() => {
    Object.defineProperty(Navigator.prototype, "language", { configurable: true, get: () => "C" });
    Object.defineProperty(Navigator.prototype, "languages", { configurable: true, get: () => ["C"] });
  });
  try {
    await cPage.goto(server.url);
    await cPage.locator("#model-name").waitFor({ timeout: 15_000 });
    assert.equal(await cPage.evaluate(() => navigator.language), "en-US");
    assert.deepEqual(errors, []);
  } finally {
    await cPage.close();
  }
});

test("a typed message gets a streamed reply with its speed", async () => {
  const deltas = [];
  await page.exposeFunction("__vkllmDelta", (t) => deltas.push(t));
  // Count the chat:delta events the page receives while the reply streams.
  await page.evaluate(
    () =>
      new Promise((open) => {
        const src = new EventSource("api/events");
        src.addEventListener("chat:delta", (e) => window.__vkllmDelta(JSON.parse(e.data).text));
        src.addEventListener("open", () => open());
      }),
  );
  await page.locator("#composer-input").fill(prompt);
  await page.locator("#composer-input").press("Enter");
  await page.locator(".msg.user .bubble", { hasText: prompt }).waitFor();
  const done = page.locator('.msg.assistant[data-state="complete"]');
  await done.waitFor();
  reply = (await done.locator(".bubble").innerText()).trim();
  assert.ok(reply.length > 0, "the reply is empty");
  assert.ok(deltas.length >= 1, "no chat:delta event arrived: the reply did not stream");
  // The reply renders as markdown, which drops spaces before a line break and extra blank lines:
  // compare the words.
  const words = (s) => s.replace(/\s+/g, " ").trim();
  assert.equal(words(deltas.join("")), words(reply), "the streamed text differs from the saved reply");
  const meta = await done.locator(".meta").innerText();
  assert.match(meta, /tok\/s/);
  assert.match(meta, /TTFT \d+ ms/);
  // The conversation is listed, titled after the message.
  await page.locator(".conv-title", { hasText: prompt }).waitFor();
});

test("the conversation is still there after a reload", async () => {
  await page.reload();
  await page.locator(".conv-title", { hasText: prompt }).click();
  await page.locator(".msg.user .bubble", { hasText: prompt }).waitFor();
  const again = (await page.locator(".msg.assistant .bubble").first().innerText()).trim();
  assert.equal(again, reply);
});

test("the conversation is still there after the app restarts", async () => {
  await stopApp(server);
  server = await startApp(dataDir);
  await page.goto(server.url);
  await page.locator(".conv-title", { hasText: prompt }).click();
  const again = (await page.locator(".msg.assistant .bubble").first().innerText()).trim();
  assert.equal(again, reply);
});

test("the model panel shows the model, the engine's plan and its devices", async () => {
  await page.locator("#tab-model").click();
  await page.locator(".facts dd", { hasText: "embedded default model" }).waitFor();
  await page.locator("#view-model .devices .card", { hasText: "CPU:" }).waitFor();
  await page.locator("#view-model .plan p").first().waitFor();
  await page.locator("#tab-chat").click();
});

test("a killed engine comes back with a notice and the next message works", async () => {
  // The app's child is the engine sidecar it spawned (the same binary, `serve`).
  const children = execFileSync("ps", ["--ppid", String(server.proc.pid), "-o", "pid=,args="], { encoding: "utf8" })
    .split("\n")
    .filter((l) => l.includes(" serve"));
  assert.equal(children.length, 1, `want one engine sidecar child, ps shows:\n${children.join("\n")}`);
  process.kill(Number(children[0].trim().split(/\s+/)[0]), "SIGKILL");
  await page.locator("#notice", { hasText: "Engine restarted" }).waitFor();
  await page.locator("#composer-input").fill("The dog");
  await page.locator("#composer-input").press("Enter");
  await page.locator('.msg.assistant[data-state="complete"]').nth(1).waitFor();
  await page.screenshot({ path: join(process.env.E2E_OUT || tmpdir(), "vkllm-e2e.png") });
});

// Last, because it replaces the model: a random-weight model from ../shared writes gibberish
// without an end token, so a long greedy reply is still streaming when Stop is pressed.
const randModel = resolve(here, "../../../shared/models/rand-llama-q8_0.gguf");

test("another GGUF opens from the model panel, and Stop keeps the partial reply as interrupted", async (t) => {
  if (!existsSync(randModel)) return t.skip(`${randModel} is not here (shared/ beside the repo holds it)`);
  await page.locator("#tab-model").click();
  await page.locator("#model-path").fill(randModel);
  await page.locator("#view-model button", { hasText: "Open" }).click();
  await page.locator("#model-name", { hasText: "rand-llama-q8_0.gguf" }).waitFor();
  await page.locator("#tab-chat").click();
  await page.locator("#new-chat").click();
  // Greedy and long, so the reply is deterministic and outlasts the click on Stop.
  const set = await page.evaluate(async () => {
    const r = await fetch("api/ChatService/SetSettings", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify([{ maxTokens: 1500, sampling: { temperature: 0 } }]),
    });
    return r.status;
  });
  assert.equal(set, 200);
  await page.locator("#composer-input").fill("Hello");
  await page.locator("#composer-input").press("Enter");
  const streaming = page.locator('.msg.assistant[data-state="streaming"] .bubble');
  await streaming.waitFor();
  await page.waitForFunction(() => (document.querySelector('.msg.assistant[data-state="streaming"] .bubble')?.textContent ?? "").length > 0);
  await page.locator("#stop").click();
  const stopped = page.locator('.msg.assistant[data-state="interrupted"]');
  await stopped.waitFor();
  assert.match(await stopped.locator(".meta").innerText(), /interrupted/i);
  const partial = (await stopped.locator(".bubble").innerText()).trim();
  assert.ok(partial.length > 0, "the interrupted reply lost its text");
  // The store kept it: reload and look again.
  await sleep(200);
  await page.reload();
  await page.locator(".conv-title", { hasText: "Hello" }).click();
  await page.locator('.msg.assistant[data-state="interrupted"]').waitFor();
});
