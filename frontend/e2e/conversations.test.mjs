// End-to-end: the conversation list (automatic distinct titles, rename, search over message text,
// delete with Undo, export as markdown and JSON) and the window's keyboard shortcuts (Ctrl+N,
// Ctrl+K, Escape stops, Up edits the last message). The echo engine (VKLLM_SIDECAR) answers each
// message with its own text, so every reply is known beforehand. Then the same app on the real
// engine and the embedded model: rename, search by a word only the model wrote, and delete with
// Undo, after which the conversation goes on.
//
//   VKLLM_APP=../build/bin/vkllm-app node --test e2e/conversations.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { appBin, openBrowser, startApp, stopApp, closeApp, waitIdle } from "./browser-app.mjs";

const echoEngine = new URL("./echo-engine.mjs", import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), "vkllm-conv-data-"));
const profileDir = mkdtempSync(join(tmpdir(), "vkllm-conv-chromium-"));
const modelDataDir = mkdtempSync(join(tmpdir(), "vkllm-conv-model-data-")); // the embedded model's run
let server;
let context;
let page;

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  server = await startApp(dataDir, { VKLLM_SIDECAR: echoEngine });
  ({ context, page } = await openBrowser(profileDir, { acceptDownloads: true }));
  page.setDefaultTimeout(30_000);
  await page.goto(server.url);
  await page.locator("#model-name", { hasText: "echo.gguf" }).waitFor();
});

after(() => closeApp(context, server, dataDir, profileDir, modelDataDir));

const idle = () => waitIdle(page);

// newChatWith starts a new chat and sends text, waiting for the echoed reply.
async function newChatWith(text) {
  await page.locator("#new-chat").click();
  await page.locator("#composer-input").fill(text);
  await page.locator("#composer-input").press("Enter");
  await page.locator(".msg.assistant .bubble", { hasText: text.slice(0, 30) }).last().waitFor();
  await idle();
}

async function titles() {
  return page.$$eval("#conversations .conv-title", (els) => els.map((el) => el.textContent.trim()));
}

// row is the sidebar row of the conversation with exactly this title.
function row(title) {
  return page.locator("#conversations .conv").filter({ has: page.locator(".conv-title", { hasText: new RegExp(`^${title.replace(/[()]/g, "\\$&")}$`) }) });
}

async function call(method, ...args) {
  return page.evaluate(
    async ([method, args]) => {
      const r = await fetch(`api/ChatService/${method}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(args) });
      return r.json();
    },
    [method, args],
  );
}

test("conversations that open with the same words get distinct short titles", async () => {
  for (let i = 0; i < 3; i++) await newChatWith("Once upon a time");
  await newChatWith("Once upon a time there was a little girl named Lily who loved to play outside");
  const got = await titles();
  for (const want of ["Once upon a time", "Once upon a time (2)", "Once upon a time (3)", "Once upon a time there was…"]) {
    assert.ok(got.includes(want), `titles ${JSON.stringify(got)} lack ${JSON.stringify(want)}`);
  }
  assert.equal(new Set(got).size, got.length, `titles repeat: ${JSON.stringify(got)}`);
});

test("rename is inline: Escape keeps the old title, Enter saves one that survives a reload", async () => {
  await row("Once upon a time (2)").locator(".conv-rename").click();
  await page.locator(".conv-rename-input").fill("should not stick");
  await page.locator(".conv-rename-input").press("Escape");
  await row("Once upon a time (2)").waitFor();
  assert.ok(!(await titles()).includes("should not stick"), "Escape saved the title");

  await row("Once upon a time (2)").focus();
  await page.keyboard.press("F2");
  await page.locator(".conv-rename-input").fill("  Lily's   story ");
  await page.locator(".conv-rename-input").press("Enter");
  await row("Lily's story").waitFor();
  await page.reload();
  await row("Lily's story").waitFor();
  assert.ok(!(await titles()).includes("Once upon a time (2)"), "the old title is still listed after the reload");
});

test("search finds a word that is only in a message's text, and Enter opens the hit", async () => {
  await newChatWith("alpha beta gamma delta epsilon zeta eta theta xylophone iota");
  await page.locator("#new-chat").click();
  await page.keyboard.press("Control+k");
  assert.equal(await page.evaluate(() => document.activeElement?.id), "conv-search", "Ctrl+K did not focus the search");
  await page.keyboard.type("XYLOPHONE");
  await page.waitForFunction(() => document.querySelectorAll("#conversations .conv").length === 1);
  assert.deepEqual(await titles(), ["alpha beta gamma delta epsilon zeta…"]);
  // the hit shows the message text it matched (the FTS5 index's snippet) under its title
  assert.match(await page.locator("#conversations .conv-snippet").textContent(), /theta xylophone iota/);
  await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");
  await page.locator(".msg.user .bubble", { hasText: "xylophone" }).waitFor();

  await page.locator("#conv-search").fill("no-such-word-anywhere");
  await page.locator("#conv-none").waitFor();
  await page.locator("#conv-search").press("Escape");
  await page.waitForFunction(() => document.querySelectorAll("#conversations .conv").length >= 5);
});

test("delete then Undo brings the conversation back with its messages", async () => {
  await row("Once upon a time (3)").locator(".conv-del").click();
  await page.locator("#undo-toast", { hasText: "Once upon a time (3)" }).waitFor();
  await row("Once upon a time (3)").waitFor({ state: "detached" });
  await page.locator("#undo-delete").click();
  await page.locator("#undo-toast").waitFor({ state: "detached" });
  await page.locator(".msg.user .bubble", { hasText: "Once upon a time" }).waitFor();
  await page.reload();
  await row("Once upon a time (3)").click();
  await page.locator(".msg.assistant .bubble", { hasText: "Once upon a time" }).waitFor();
});

test("delete without Undo is gone for good once the toast expires", async () => {
  const id = Number(await row("Once upon a time (3)").getAttribute("data-id"));
  await row("Once upon a time (3)").locator(".conv-del").click();
  await page.locator("#undo-toast").waitFor();
  await page.locator("#undo-toast").waitFor({ state: "detached", timeout: 15_000 });
  await page.reload();
  await row("Once upon a time").waitFor();
  assert.ok(!(await titles()).includes("Once upon a time (3)"), "the deleted conversation is listed again");
  const restore = await call("RestoreConversation", id);
  assert.ok(restore.error, "the expired delete could still be undone: its rows were not removed");
  const msgs = await call("Messages", id);
  assert.deepEqual(msgs.result, [], "the deleted conversation's messages remain");
});

test("export gives the conversation's messages as markdown and as JSON", async () => {
  const text = "alpha beta gamma delta epsilon zeta eta theta xylophone iota";
  const conv = row("alpha beta gamma delta epsilon zeta…");
  await conv.hover();
  const [md] = await Promise.all([page.waitForEvent("download"), conv.locator(".conv-export-md").click()]);
  assert.match(md.suggestedFilename(), /^alpha-beta-gamma-delta-epsilon-zeta\.md$/);
  const mdText = readFileSync(await md.path(), "utf8");
  assert.match(mdText, /^# alpha beta gamma delta epsilon zeta…/);
  assert.ok(mdText.includes(`## You\n\n${text}`), `markdown export lacks the user message:\n${mdText}`);
  assert.ok(mdText.includes(`## Assistant\n\n${text}`), `markdown export lacks the reply:\n${mdText}`);

  const [js] = await Promise.all([page.waitForEvent("download"), conv.locator(".conv-export-json").click()]);
  assert.match(js.suggestedFilename(), /\.json$/);
  const doc = JSON.parse(readFileSync(await js.path(), "utf8"));
  assert.deepEqual(
    doc.messages.map((m) => [m.role, m.content]),
    [
      ["user", text],
      ["assistant", text],
    ],
  );
});

test("Ctrl+N starts a new chat with the composer focused", async () => {
  await row("Lily's story").click();
  await page.locator(".msg").first().waitFor();
  await page.locator("#conv-search").focus();
  await page.keyboard.press("Control+n");
  await page.waitForFunction(() => document.querySelectorAll(".msg").length === 0);
  await page.waitForFunction(() => document.activeElement?.id === "composer-input");
  assert.equal(await page.locator("#conversations .conv.active").count(), 0, "a listed conversation is still shown as open");
});

test("Escape stops a streaming reply, which stays as interrupted", async () => {
  // 1600 characters: 100 pieces, 3 s of echo (the echo engine counts a character as a prompt
  // token, and the prompt plus max tokens has to fit its 4096).
  const long = "stop me ".repeat(200);
  await page.locator("#composer-input").fill(long);
  await page.locator("#composer-input").press("Enter");
  await page.locator('.msg.assistant[data-state="streaming"] .bubble', { hasText: "stop me" }).waitFor();
  await page.keyboard.press("Escape");
  const reply = page.locator(".msg.assistant").last();
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].at(-1)?.dataset.state !== "streaming", null, { timeout: 5_000 });
  assert.equal(await reply.getAttribute("data-state"), "interrupted");
  const shown = (await reply.locator(".bubble").innerText()).trim();
  assert.ok(shown.length > 0 && shown.length < long.trim().length, `the stopped reply has ${shown.length} characters; want part of ${long.length}`);
  await idle();
});

test("Up in the empty composer edits the last user message", async () => {
  await newChatWith("first line");
  await page.locator("#composer-input").fill("second line");
  await page.locator("#composer-input").press("Enter");
  await page.locator(".msg.assistant .bubble", { hasText: "second line" }).waitFor();
  await idle();
  // Up with text in the box moves the caret, it does not edit.
  await page.locator("#composer-input").fill("draft");
  await page.locator("#composer-input").press("ArrowUp");
  assert.equal(await page.locator(".edit-input").count(), 0, "Up with text in the composer opened an editor");
  await page.locator("#composer-input").fill("");
  await page.locator("#composer-input").press("ArrowUp");
  await page.locator(".edit-input").waitFor();
  assert.equal(await page.locator(".edit-input").inputValue(), "second line");
  assert.ok(await page.evaluate(() => document.activeElement?.classList.contains("edit-input")), "the editor did not take the focus");
  await page.locator(".edit-input").fill("second line, edited");
  await page.locator(".edit-input").press("Enter");
  await page.locator(".msg.assistant .bubble", { hasText: "second line, edited" }).waitFor();
  await idle();
  assert.equal(await page.locator(".msg").count(), 4);
});

// chatWith starts a new chat, sends text and returns the model's reply once it is complete.
async function chatWith(text) {
  await page.locator("#new-chat").click();
  await page.locator("#composer-input").fill(text);
  await page.locator("#composer-input").press("Enter");
  const done = page.locator('.msg.assistant[data-state="complete"]').last();
  await done.waitFor({ timeout: 120_000 });
  await waitIdle(page);
  const reply = (await done.locator(".bubble").innerText()).trim();
  assert.ok(reply.length > 0, `the model gave ${JSON.stringify(text)} an empty reply`);
  return reply;
}

const words = (s) => new Set(s.toLowerCase().match(/[a-z]{4,}/g) ?? []);

let fox; // the reply to the first conversation
let dog;
let only; // a word of fox's reply in no other message or title

// On the embedded model: the real sidecar and engine, a fresh store, short greedy replies.
test("on the embedded model: two conversations answered by the model", async () => {
  await stopApp(server);
  // Where the model runs does not matter here: the CPU starts at once (a 1 MiB pin declines the GPU).
  server = await startApp(modelDataDir, { VKLLM_GPU_VRAM_MB: "1", VKLLM_SIDECAR: "" });
  page.setDefaultTimeout(60_000);
  await page.goto(server.url);
  await page.locator("#model-name", { hasText: "stories260K" }).waitFor();
  const set = await page.evaluate(async () => {
    const r = await fetch("api/ChatService/SetSettings", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify([{ maxTokens: 48, sampling: { temperature: 0 } }]),
    });
    return r.status;
  });
  assert.equal(set, 200);
  fox = await chatWith("Once upon a time there was a fox");
  dog = await chatWith("The little dog");
  const others = words(`${dog} The little dog Once upon a time there was a fox`);
  only = [...words(fox)].find((w) => !others.has(w));
  assert.ok(only, `the fox reply ${JSON.stringify(fox)} has no word of its own beside ${JSON.stringify(dog)}`);
});

test("on the embedded model: search finds a conversation by a word only the model wrote, and opens it", async () => {
  await page.keyboard.press("Control+k");
  await page.keyboard.type(only.toUpperCase());
  await page.waitForFunction(() => document.querySelectorAll("#conversations .conv").length === 1);
  assert.deepEqual(await titles(), ["Once upon a time there was…"], `searching ${only} lists ${JSON.stringify(await titles())}`);
  await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");
  await page.locator(".msg.assistant .bubble", { hasText: fox.slice(0, 20) }).waitFor();
  await page.locator("#conv-search").press("Escape");
  await page.waitForFunction(() => document.querySelectorAll("#conversations .conv").length === 2);
});

test("on the embedded model: rename keeps the conversation, and the new title is found and kept after a reload", async () => {
  await row("Once upon a time there was…").focus();
  await page.keyboard.press("F2");
  await page.locator(".conv-rename-input").fill("Fox story");
  await page.locator(".conv-rename-input").press("Enter");
  await row("Fox story").waitFor();
  await page.reload();
  await row("Fox story").click();
  await page.locator(".msg.assistant .bubble", { hasText: fox.slice(0, 20) }).waitFor();
  await page.locator("#conv-search").fill("fox story");
  await page.waitForFunction(() => document.querySelectorAll("#conversations .conv").length === 1);
  assert.deepEqual(await titles(), ["Fox story"]);
  await page.locator("#conv-search").press("Escape");
  await page.waitForFunction(() => document.querySelectorAll("#conversations .conv").length === 2);
});

test("on the embedded model: delete then Undo brings the conversation back, and it goes on", async () => {
  await row("Fox story").locator(".conv-del").click();
  await page.locator("#undo-toast", { hasText: "Fox story" }).waitFor();
  await row("Fox story").waitFor({ state: "detached" });
  await page.locator("#undo-delete").click();
  await page.locator("#undo-toast").waitFor({ state: "detached" });
  await page.reload();
  await row("Fox story").click();
  await page.locator(".msg.assistant .bubble", { hasText: fox.slice(0, 20) }).waitFor();
  // The restored conversation still talks to the model: its next reply streams and completes.
  await page.locator("#composer-input").fill("What did the fox do next?");
  await page.locator("#composer-input").press("Enter");
  await page.locator('.msg.assistant[data-state="complete"]').nth(1).waitFor({ timeout: 120_000 });
  await waitIdle(page);
  const replies = await page.$$eval(".msg.assistant .bubble", (els) => els.map((el) => el.textContent.trim()));
  assert.equal(replies.length, 2, `the restored conversation shows ${replies.length} replies`);
  assert.ok(replies[1].length > 0, "the reply after Undo is empty");
});
