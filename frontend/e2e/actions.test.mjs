// End-to-end: the actions on each message (copy, edit and resend, regenerate with its versions,
// delete; Continue is in settings.test.mjs), operated by keyboard as well as by click. The echo
// engine (VKLLM_SIDECAR) answers each message with its own text, so every reply is known
// beforehand.
//
//   VKLLM_APP=../build/bin/vkllm-app node --test e2e/actions.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { appBin, openBrowser, startApp, closeApp, waitIdle } from "./browser-app.mjs";

const echoEngine = new URL("./echo-engine.mjs", import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), "vkllm-act-data-"));
const profileDir = mkdtempSync(join(tmpdir(), "vkllm-act-chromium-"));
let server;
let context;
let page;

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  server = await startApp(dataDir, { VKLLM_SIDECAR: echoEngine });
  ({ context, page } = await openBrowser(profileDir));
  page.setDefaultTimeout(30_000);
  await context.addInitScript(() => {
    window.__copied = [];
    Object.defineProperty(navigator, "clipboard", { value: { writeText: async (t) => void window.__copied.push(t) } });
  });
  await page.goto(server.url);
  await page.locator("#model-name", { hasText: "echo.gguf" }).waitFor();
});

after(() => closeApp(context, server, dataDir, profileDir));

const idle = () => waitIdle(page);

async function send(text) {
  await page.locator("#composer-input").fill(text);
  await page.locator("#composer-input").press("Enter");
  await page.locator(".msg.assistant .bubble", { hasText: text }).last().waitFor();
  await idle();
}

// transcript is the conversation shown, one "role: text" per message.
async function transcript() {
  return page.$$eval(".msg", (els) => els.map((el) => `${el.classList.contains("user") ? "user" : "assistant"}: ${el.querySelector(".bubble")?.textContent?.trim()}`));
}

// reopen reloads the page and opens the conversation again, so what it shows is what was stored.
async function reopen(title) {
  await page.reload();
  await page.locator(".conv-title", { hasText: title }).click();
  await page.locator(".msg").first().waitFor();
}

test("copy puts a message's text on the clipboard", async () => {
  await send("first question");
  await send("second question");
  await page.locator(".msg.assistant").first().locator(".act-copy").click();
  await page.waitForFunction(() => window.__copied.length > 0);
  assert.deepEqual(await page.evaluate(() => window.__copied), ["first question"]);
  await page.locator(".msg.user").nth(1).locator(".act-copy").click();
  await page.waitForFunction(() => window.__copied.length > 1);
  assert.equal(await page.evaluate(() => window.__copied[1]), "second question");
});

test("regenerate, from the keyboard, streams a new version of the reply into it", async () => {
  // Watch the chat events: a regenerated reply starts without a user message and streams anew.
  await page.evaluate(
    () =>
      new Promise((open) => {
        window.__chatEvents = [];
        const src = new EventSource("api/events");
        src.addEventListener("chat:event", (e) => window.__chatEvents.push(JSON.parse(e.data)));
        src.addEventListener("open", () => open());
      }),
  );
  const last = page.locator(".msg.assistant").last();
  await last.locator(".act-regenerate").focus();
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => window.__chatEvents.some((e) => e.kind === "finished"));
  await idle();
  const events = await page.evaluate(() => window.__chatEvents);
  assert.deepEqual(
    events.map((e) => [e.kind, Boolean(e.user), e.assistant.content]),
    [
      ["started", false, ""],
      ["finished", false, "second question"],
    ],
    "the regenerate did not stream one new reply to the same question",
  );
  assert.deepEqual(await transcript(), ["user: first question", "assistant: first question", "user: second question", "assistant: second question"]);
  assert.equal(await page.locator(".msg.assistant").last().locator(".alt-pos").innerText(), "2/2", "the regenerated reply does not say it is version 2 of 2");
  await reopen("first question");
  assert.equal(await page.locator(".msg").count(), 4, "the store kept the old reply beside the new one");
});

test("edit and resend replaces the message and what followed it", async () => {
  await page.locator(".msg.user").first().locator(".act-edit").click();
  const box = page.locator(".edit-input");
  assert.equal(await box.inputValue(), "first question", "the editor does not start from the message");
  await box.fill("an edited question");
  await page.locator(".act-resend").click();
  await page.locator(".msg.assistant .bubble", { hasText: "an edited question" }).waitFor();
  await idle();
  assert.deepEqual(await transcript(), ["user: an edited question", "assistant: an edited question"]);
  await reopen("first question");
  assert.deepEqual(await transcript(), ["user: an edited question", "assistant: an edited question"]);
});

test("delete, from the keyboard, removes just that message", async () => {
  await send("third question");
  const reply = page.locator(".msg.assistant").first();
  await reply.locator(".act-delete").focus();
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelectorAll(".msg").length === 3);
  assert.deepEqual(await transcript(), ["user: an edited question", "user: third question", "assistant: third question"]);
  await reopen("first question");
  assert.deepEqual(await transcript(), ["user: an edited question", "user: third question", "assistant: third question"]);
});

// The echo engine cuts its echo at max tokens (16 characters a token), so regenerating under
// another max tokens gives another, known reply.
test("regenerate keeps the earlier replies as alternatives: 2/3 flips between them, they survive a reload, and the one shown is what the next turn sees", async () => {
  const q = "versions of a reply one two three four five six seven";
  await page.locator("#new-chat").click();
  await send(q);
  const reply = page.locator(".msg.assistant").last();
  const text = async () => (await reply.locator(".bubble").innerText()).trim();
  const pos = () => reply.locator(".alt-pos").innerText();
  assert.equal(await reply.locator(".alt-switch").count(), 0, "a reply never regenerated shows a version switcher");
  if (!(await page.locator("#chat-settings").isVisible())) await page.locator("#settings-toggle").click();
  for (const [max, want] of [
    [1, "2/2"],
    [2, "3/3"],
  ]) {
    await page.locator("#set-max-tokens").fill(String(max));
    await page.locator("#set-max-tokens").press("Tab");
    await page.locator("#settings-status", { hasText: "Saved" }).waitFor();
    await reply.locator(".act-regenerate").click();
    await reply.locator(".alt-pos", { hasText: want }).waitFor();
    await idle();
    assert.equal(await text(), q.slice(0, 16 * max), `version ${want} is not the reply cut at ${max} tokens`);
  }
  assert.equal(await page.locator(".msg").count(), 2, "regenerate added messages instead of versions");
  await reply.locator(".alt-prev").click();
  await reply.locator(".alt-pos", { hasText: "2/3" }).waitFor();
  assert.equal(await text(), q.slice(0, 16));
  await reply.locator(".alt-prev").focus();
  await page.keyboard.press("Enter");
  await reply.locator(".alt-pos", { hasText: "1/3" }).waitFor();
  assert.equal(await text(), q, "version 1 is not the first, whole reply");
  assert.ok(await reply.locator(".alt-prev").isDisabled(), "version 1 still offers a previous one");

  // Stored: a reload shows the version chosen, and the others are still there.
  await reopen("versions of a reply");
  assert.equal(await pos(), "1/3");
  assert.equal(await text(), q);
  await reply.locator(".alt-next").click();
  await reply.locator(".alt-pos", { hasText: "2/3" }).waitFor();
  assert.equal(await text(), q.slice(0, 16));

  // The next turn sees version 2: the echo engine counts a character of the prompt as a token,
  // so the context line's total is the question, the 16 characters of version 2, "zz" and the
  // one token of its echo.
  await send("zz");
  await page.locator("#context-use", { hasText: `${q.length + 16 + 2 + 1} / 4096 tokens` }).waitFor();
  assert.equal(await page.locator(".msg.assistant").first().locator(".alt-pos").innerText(), "2/3", "the switcher left the earlier reply");
});
