// End-to-end: the app runs on the GPU. The real app binary in browser mode with its real sidecar
// (itself, `serve`) and the embedded model, on whatever Vulkan device the machine has (Mesa's
// lavapipe on a machine without a GPU), with VKLLM_GPU_VRAM_MB pinning 512 MiB so the resident
// plan arms: the header must say vulkan/resident and a reply must stream. Then a 1 MiB pin, which
// no model fits, must put the header on the CPU with the plan's verdict as the reason.
//
//   VKLLM_APP=../build/bin/vkllm-app node --test e2e/gpu.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { appBin, openBrowser, startApp, stopApp, closeApp } from "./browser-app.mjs";

const dataDir = mkdtempSync(join(tmpdir(), "vkllm-e2e-gpu-data-"));
const profileDir = mkdtempSync(join(tmpdir(), "vkllm-e2e-gpu-chromium-"));
// The placement settings a developer's shell may hold are cleared, so only the pin decides.
const placementEnv = (pinMB) => ({ VKLLM_GPU_VRAM_MB: String(pinMB), VKLLM_GPU_RESIDENT: "1", VKLLM_DEVICE: "" });
let server; // { proc, url }
let context;
let page;

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  server = await startApp(dataDir, placementEnv(512));
  ({ context, page } = await openBrowser(profileDir));
});

after(() => closeApp(context, server, dataDir, profileDir));

test("with a 512 MiB pin the header says the model is resident on Vulkan, as the plan does", async () => {
  await page.goto(server.url);
  const placement = page.locator("#model-placement");
  await placement.waitFor();
  const badge = await page.locator("#model-badge").innerText();
  assert.equal(
    (await placement.innerText()).trim(),
    "resident",
    `the header says ${JSON.stringify(badge)}, want resident on vulkan (a Vulkan device is needed: mesa-vulkan-drivers gives lavapipe)`,
  );
  assert.match(badge, /\bvulkan\b/, `the header names no Vulkan backend: ${JSON.stringify(badge)}`);
  assert.equal(await page.locator("#cpu-reason").isVisible(), false, "a model on the GPU shows a reason for the CPU");
  // The Model tab's plan agrees with the header (the bug was a plan saying armed over a CPU load).
  await page.locator("#tab-model").click();
  await page.locator("#view-model .plan", { hasText: "resident driver armed" }).waitFor();
  await page.locator(".facts dd", { hasText: "vulkan" }).waitFor();
  await page.locator("#tab-chat").click();
});

test("a reply streams from the GPU", async () => {
  const deltas = [];
  await page.exposeFunction("__vkllmDelta", (t) => deltas.push(t));
  await page.evaluate(
    () =>
      new Promise((open) => {
        const src = new EventSource("api/events");
        src.addEventListener("chat:delta", (e) => window.__vkllmDelta(JSON.parse(e.data).text));
        src.addEventListener("open", () => open());
      }),
  );
  // Lavapipe runs the shaders on the CPU: a few greedy tokens keep the test short.
  const set = await page.evaluate(async () => {
    const r = await fetch("api/ChatService/SetSettings", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify([{ maxTokens: 12, sampling: { temperature: 0 } }]),
    });
    return r.status;
  });
  assert.equal(set, 200);
  await page.locator("#composer-input").fill("Once upon a time");
  await page.locator("#composer-input").press("Enter");
  const done = page.locator('.msg.assistant[data-state="complete"]');
  await done.waitFor({ timeout: 180_000 });
  const reply = (await done.locator(".bubble").innerText()).trim();
  assert.ok(reply.length > 0, "the reply is empty");
  assert.ok(deltas.length >= 1, "no chat:delta event arrived: the reply did not stream");
  assert.equal(deltas.join("").trim(), reply, "the streamed text differs from the saved reply");
  assert.match(await done.locator(".meta").innerText(), /tok\/s/);
  // Still on the GPU after the reply (a failed upload would have restarted the engine).
  assert.equal((await page.locator("#model-placement").innerText()).trim(), "resident");
});

test("with a pin no model fits the header says why in words: the plan's numbers and the remedy", async () => {
  await stopApp(server);
  server = await startApp(dataDir, placementEnv(1));
  await page.goto(server.url);
  await page.locator("#model-placement", { hasText: "cpu" }).waitFor();
  const reason = (await page.locator("#cpu-reason").innerText()).trim();
  // The engine's own sentence quotes the plan's line with VKLLM_GPU_VRAM_MB as the remedy; the
  // app says the numbers in words and the remedy as the app has it.
  assert.match(
    reason,
    /^On the CPU: the model needs \d+ MB of GPU memory at a context of \d+ tokens \(weights \d+ MB, KV cache \d+ MB, scratch \d+ MB\), but the VRAM limit the app was started with allows 1 MB\. Start the app without that limit/,
  );
  assert.doesNotMatch(reason, /VKLLM_/, "the header names an environment variable");
  assert.doesNotMatch(reason, /--|vkllm pin|resident driver|gpu backend declined|no GPU support/, "the header quotes the CLI or an internal chain");
  await page.locator("#tab-model").click();
  const why = page.locator(".facts dd", { hasText: "the model needs" });
  await why.waitFor();
  assert.doesNotMatch(await why.innerText(), /VKLLM_/, "the Model tab's reason names an environment variable");
});

test("after Unload the header says no model is loaded, in words, and offers to open one", async () => {
  await page.locator("#model-unload").click();
  const none = page.locator("#model-none");
  await none.waitFor();
  assert.equal((await none.innerText()).replace(/\s+/g, " ").trim(), "No model loaded — open one in the Model tab.");
  assert.doesNotMatch(await page.locator("#model-badge").innerText(), /engine not ready|VKLLM_|:/);
  await page.locator("#tab-chat").click();
  await page.locator("#model-none-open").click();
  await page.locator("#model-embedded").waitFor(); // the button opened the Model tab
  // After a reload of the page the app itself says it (ModelService.Current's error).
  await page.reload();
  await page.locator("#model-none", { hasText: "No model loaded — open one in the Model tab." }).waitFor();
  await page.locator("#tab-model").click();
  await page.locator("#model-embedded").click();
  await page.locator("#model-placement").waitFor();
});
