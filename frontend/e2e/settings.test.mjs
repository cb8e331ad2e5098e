// End-to-end: a conversation's generation settings. With the echo engine (VKLLM_SIDECAR; 16
// characters are a token) max tokens cuts the reply, which then says "stopped: max tokens" and
// continues on Continue; the system prompt reaches the engine; the settings survive a reload,
// and quick edits of two fields keep both.
// With the embedded model and the real sidecar, the same seed gives the same sampled reply, and
// the model's load options (context, device, KV cache) reload it and survive an app restart.
//
//   VKLLM_APP=../build/bin/vkllm-app node --test e2e/settings.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { appBin, openBrowser, startApp, stopApp } from "./browser-app.mjs";

const echoEngine = new URL("./echo-engine.mjs", import.meta.url).pathname;
const dirs = [];
const tempDir = (prefix) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
};
let echo; // the app on the echo engine
let real; // the app on its own sidecar and the embedded model
let browser;
let page;

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  echo = await startApp(tempDir("vkllm-set-data-"), { VKLLM_SIDECAR: echoEngine });
  browser = await openBrowser(tempDir("vkllm-set-chromium-"));
  page = browser.page;
  page.setDefaultTimeout(30_000);
  await page.goto(echo.url);
  await page.locator("#model-name", { hasText: "echo.gguf" }).waitFor();
});

after(async () => {
  await browser?.context.close();
  await stopApp(echo);
  await stopApp(real);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

// setField types a value into a settings field and leaves it, which saves it.
async function setField(id, value) {
  const field = page.locator(id);
  await field.fill(String(value));
  await field.press("Tab");
}

async function openSettings() {
  if (!(await page.locator("#chat-settings").isVisible())) await page.locator("#settings-toggle").click();
  await page.locator("#set-max-tokens").waitFor();
}

// lastReply waits until the conversation's last reply is no longer streaming and returns it.
async function lastReply() {
  await page.waitForFunction(() => {
    const all = document.querySelectorAll(".msg.assistant");
    const m = all[all.length - 1];
    return m && m.getAttribute("data-state") !== "streaming" && !document.querySelector("#send").disabled;
  });
  return page.locator(".msg.assistant").last();
}

async function send(text) {
  const before = await page.locator(".msg.assistant").count();
  await page.locator("#composer-input").fill(text);
  await page.locator("#composer-input").press("Enter");
  await page.waitForFunction((n) => document.querySelectorAll(".msg.assistant").length > n, before);
  return lastReply();
}

// 80 characters: 5 echo tokens.
const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqr";

test("the settings of the chat a fresh page starts with are the defaults", async () => {
  await openSettings();
  assert.equal(await page.locator("#set-max-tokens").inputValue(), "256");
  assert.equal(await page.locator("#set-temperature").inputValue(), "0.7");
});

test("max tokens cuts a new chat's reply, which says so and continues on Continue", async () => {
  await page.locator("#new-chat").click();
  await openSettings();
  await setField("#set-max-tokens", 2);
  await page.locator("#settings-status", { hasText: "Kept for this new chat" }).waitFor();
  let reply = await send(alphabet);
  assert.equal((await reply.locator(".bubble").innerText()).trim(), alphabet.slice(0, 32), "the reply was not cut at 2 tokens");
  assert.equal(await reply.getAttribute("data-stop"), "length");
  assert.equal((await reply.locator(".stop-reason").innerText()).trim(), "stopped: max tokens");
  // Continue twice: 2 more tokens, then the last one, which ends on its own.
  await reply.locator(".act-continue").click();
  await page.waitForFunction((t) => document.querySelector(".msg.assistant:last-of-type .bubble")?.textContent?.trim() === t, alphabet.slice(0, 64));
  reply = await lastReply();
  assert.equal(await reply.getAttribute("data-stop"), "length");
  await reply.locator(".act-continue").click();
  await page.waitForFunction((t) => document.querySelector(".msg.assistant:last-of-type .bubble")?.textContent?.trim() === t, alphabet);
  reply = await lastReply();
  assert.equal(await reply.getAttribute("data-stop"), "eos");
  assert.equal(await reply.locator(".stop-reason").count(), 0, "a reply that ended on its own still says it was cut");
  assert.equal(await reply.locator(".act-continue").count(), 0, "a finished reply offers Continue");
  assert.equal(await page.locator(".msg.assistant").count(), 1, "Continue added a message instead of extending the reply");
});

test("the system prompt reaches the engine, only in its own conversation", async () => {
  await openSettings();
  await setField("#set-max-tokens", 100);
  await setField("#set-system", "You are a pirate named Zed.");
  await page.locator("#settings-status", { hasText: "Saved" }).waitFor();
  const reply = await send("echo-system");
  assert.equal((await reply.locator(".bubble").innerText()).trim(), "You are a pirate named Zed.");
  await page.locator("#new-chat").click();
  const other = await send("echo-system");
  assert.equal((await other.locator(".bubble").innerText()).trim(), "(no system prompt)");
});

test("a conversation's settings are still there after a reload", async () => {
  await page.reload();
  await page.locator(".conv-title", { hasText: alphabet.slice(0, 20) }).click();
  await openSettings();
  assert.equal(await page.locator("#set-max-tokens").inputValue(), "100");
  assert.equal(await page.locator("#set-system").inputValue(), "You are a pirate named Zed.");
  // A value out of range is refused, naming the setting, and nothing is saved.
  await setField("#set-top-p", 3);
  await page.locator("#settings-status.error", { hasText: "top_p" }).waitFor();
  await page.reload();
  await page.locator(".conv-title", { hasText: alphabet.slice(0, 20) }).click();
  await openSettings();
  assert.notEqual(await page.locator("#set-top-p").inputValue(), "3");
});

// Two fields left in quick succession: the first one's save is held back 800 ms on its way to
// the app, the second field is typed and left meanwhile. The typed text stays in its field, and
// after a reload both values are the saved ones (an older copy of the settings, sent later or
// answered later, must not win).
test("a field edited while another field's save is on its way keeps what was typed", async () => {
  let first = true;
  let pending = 0;
  let done = 0;
  const handler = async (route) => {
    pending++;
    if (first) {
      first = false;
      await new Promise((r) => setTimeout(r, 800));
    }
    const response = await route.fetch();
    await route.fulfill({ response });
    pending--;
    done++;
  };
  await page.route("**/api/ChatService/SetConversationSettings", handler);
  try {
    await openSettings();
    await setField("#set-max-tokens", 77);
    await setField("#set-system", "You are a parrot named Ada.");
    for (let i = 0; i < 200 && (done < 2 || pending > 0); i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(done, 2, "the two saves did not both reach the app");
    assert.equal(await page.locator("#set-system").inputValue(), "You are a parrot named Ada.", "the typed system prompt was replaced by an earlier save's answer");
  } finally {
    await page.unroute("**/api/ChatService/SetConversationSettings", handler);
  }
  await page.reload();
  await page.locator(".conv-title", { hasText: alphabet.slice(0, 20) }).click();
  await openSettings();
  assert.equal(await page.locator("#set-max-tokens").inputValue(), "77");
  assert.equal(await page.locator("#set-system").inputValue(), "You are a parrot named Ada.");
});

// On the embedded model at temperature 1: seed 42 twice gives one reply; another seed another.
test("the same seed gives the same sampled reply on the embedded model", async () => {
  real = await startApp(tempDir("vkllm-seed-data-"));
  await page.goto(real.url);
  await page.locator("#model-name").waitFor();
  const replies = [];
  for (const seed of [42, 42, 7]) {
    await page.locator("#new-chat").click();
    await openSettings();
    await setField("#set-temperature", 1);
    await setField("#set-top-p", 1);
    await setField("#set-min-p", 0);
    await setField("#set-seed", seed);
    await setField("#set-max-tokens", 40);
    const reply = await send("Once upon a time");
    assert.equal(await reply.getAttribute("data-state"), "complete");
    replies.push((await reply.locator(".bubble").innerText()).trim());
  }
  console.log(`# seed 42: ${JSON.stringify(replies[0])}\n# seed 7: ${JSON.stringify(replies[2])}`);
  assert.ok(replies[0].length > 0, "the reply is empty");
  assert.equal(replies[1], replies[0], "seed 42 gave two different replies");
  assert.notEqual(replies[2], replies[0], "seeds 42 and 7 gave the same reply: the seed does not reach the sampler");
});

// The model's load options (the header's Load options panel) on the embedded model, trained for
// 2048 positions: a shorter context on the CPU with an f32 KV cache reloads the model, the header
// and the context line show it, a context past the training is refused, and after an app restart
// the model loads with the saved options again.
test("load options reload the model with a new context, device and KV cache, and survive a restart", async () => {
  const dataDir = tempDir("vkllm-load-data-");
  let app = await startApp(dataDir);
  try {
    await page.goto(app.url);
    await page.locator("#model-context").waitFor();
    await page.locator("#load-options-toggle").click();
    await page.locator("#lo-bounds", { hasText: "trained for 2048" }).waitFor();
    const devices = await page.locator("#lo-device option").evaluateAll((os) => os.map((o) => o.value));
    assert.equal(devices[0], "auto", "the device list does not start with the automatic choice");
    assert.equal(devices.at(-1), "cpu", "the device list does not end with the CPU");
    assert.ok(await page.locator('#lo-kv option[value="f32"]').isDisabled(), "an f32 cache is offered for a GPU choice");

    // Past the training: refused in one sentence, nothing reloaded.
    await page.locator("#lo-device").selectOption("cpu");
    await page.locator("#lo-context").fill("4096");
    await page.locator("#lo-apply").click();
    await page.locator("#lo-status.error", { hasText: "more than the 2048" }).waitFor();

    await page.locator("#lo-context").fill("256");
    await page.locator("#lo-kv").selectOption("f32");
    await page.locator("#lo-apply").click();
    await page.locator("#lo-status", { hasText: "Reloaded: context 256, cpu." }).waitFor();
    await page.locator("#model-context", { hasText: "ctx 256" }).waitFor();
    assert.equal((await page.locator("#model-placement").innerText()).trim(), "cpu");
    assert.equal((await page.locator("#cpu-reason").innerText()).trim(), "On the CPU: chosen in the load options (Device: CPU).");

    await page.locator("#new-chat").click();
    await openSettings();
    await setField("#set-max-tokens", 16);
    const reply = await send("Once upon a time");
    assert.equal(await reply.getAttribute("data-state"), "complete");
    await page.locator("#context-use", { hasText: "/ 256 tokens of context" }).waitFor();

    // Restart the app on the same store: the model loads with the saved options.
    await stopApp(app);
    app = await startApp(dataDir);
    await page.goto(app.url);
    await page.locator("#model-context", { hasText: "ctx 256" }).waitFor();
    assert.equal((await page.locator("#cpu-reason").innerText()).trim(), "On the CPU: chosen in the load options (Device: CPU).");
    await page.locator("#load-options-toggle").click();
    await page.locator("#lo-context").waitFor();
    assert.equal(await page.locator("#lo-context").inputValue(), "256");
    assert.equal(await page.locator("#lo-device").inputValue(), "cpu");
    assert.equal(await page.locator("#lo-kv").inputValue(), "f32");
  } finally {
    await stopApp(app);
  }
});

// With a 512 MiB pin the plan arms on whatever Vulkan device there is (lavapipe without a GPU):
// the load options move the model onto it at a chosen context and back to the CPU, and the
// header says where it runs and why each time.
test("load options move the model between a GPU and the CPU, the header following", async (t) => {
  const app = await startApp(tempDir("vkllm-load-gpu-data-"), { VKLLM_GPU_VRAM_MB: "512" });
  try {
    await page.goto(app.url);
    await page.locator("#model-context").waitFor();
    await page.locator("#load-options-toggle").click();
    await page.locator("#lo-bounds").waitFor();
    const gpus = await page.locator("#lo-device option").evaluateAll((os) => os.map((o) => o.value).filter((v) => v.startsWith("gpu:")));
    if (gpus.length === 0) return t.skip("no Vulkan device on this machine");
    await page.locator("#lo-device").selectOption(gpus[0]);
    await page.locator("#lo-bounds", { hasText: "the plan fits 2048 on GPU" }).waitFor();
    await page.locator("#lo-context").fill("1024");
    await page.locator("#lo-apply").click();
    await page.locator("#lo-status", { hasText: "Reloaded: context 1024, resident." }).waitFor();
    await page.locator("#model-context", { hasText: "ctx 1024" }).waitFor();
    assert.equal((await page.locator("#model-placement").innerText()).trim(), "resident");
    assert.ok(await page.locator("#cpu-reason").isHidden(), "the header gives a CPU reason for a model on the GPU");
    await page.locator("#lo-device").selectOption("cpu");
    await page.locator("#lo-apply").click();
    await page.locator("#lo-status", { hasText: "Reloaded: context 1024, cpu." }).waitFor();
    assert.equal((await page.locator("#model-placement").innerText()).trim(), "cpu");
    assert.equal((await page.locator("#cpu-reason").innerText()).trim(), "On the CPU: chosen in the load options (Device: CPU).");
  } finally {
    await stopApp(app);
  }
});
