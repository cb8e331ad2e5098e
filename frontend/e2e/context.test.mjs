// End-to-end: a conversation longer than the embedded model's context (2048 tokens) on the real
// app binary and its real sidecar, in browser mode, driven by headless Debian Chromium.
//
//   VKLLM_APP=../build/bin/vkllm-app node --test e2e/context.test.mjs
//
// Twenty turns of long user messages with four-token greedy replies: the context fills by about
// the eighth, the default policy (the rolling window keeping the system prompt) makes room, and
// no turn fails. The engine's prefix cache evaluates only a turn's new text when the window did not
// roll (the count the engine reports, under the context line); a turn that rolls is evaluated in
// full. Time to first token is printed, not asserted: on a shared machine it is noise.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { appBin, openBrowser, startApp, closeApp } from "./browser-app.mjs";

const dataDir = mkdtempSync(join(tmpdir(), "vkllm-e2e-ctx-data-"));
const profileDir = mkdtempSync(join(tmpdir(), "vkllm-e2e-ctx-chromium-"));
let server;
let context;
let page;

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  server = await startApp(dataDir);
  ({ context, page } = await openBrowser(profileDir));
});

after(() => closeApp(context, server, dataDir, profileDir));

const sentences = [
  "The little cat saw a big red ball in the park and ran after it all day long.",
  "Tom and his mom went to the shop to buy some milk, bread and a sweet green apple.",
  "One sunny day a happy bird sang a song on the tall tree next to the blue lake.",
  "Lily found a shiny stone near the river and showed it to her best friend Ben.",
];

// turnText is a user message of a few hundred tokens, different each turn.
function turnText(i) {
  const parts = [`Turn ${i}.`];
  for (let k = 0; k < 6; k++) parts.push(sentences[(i + k) % sentences.length]);
  return parts.join(" ");
}

test("twenty long turns on the embedded model never fail, and a turn that does not roll evaluates only its new text", async () => {
  await page.goto(server.url);
  await page.locator("#model-name").waitFor();
  const set = await page.evaluate(async () => {
    const r = await fetch("api/ChatService/SetSettings", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify([{ maxTokens: 4, sampling: { temperature: 0 } }]),
    });
    return r.status;
  });
  assert.equal(set, 200, "SetSettings failed");
  assert.equal(await page.locator("#context-policy").inputValue(), "rolling", "the default policy is not the rolling window");

  const ttft = [];
  const uses = [];
  for (let i = 1; i <= 20; i++) {
    await page.locator("#composer-input").fill(turnText(i));
    await page.locator("#composer-input").press("Enter");
    const reply = page.locator(".msg.assistant").nth(i - 1);
    await page.waitForFunction((n) => {
      const m = document.querySelectorAll(".msg.assistant")[n];
      return m && m.getAttribute("data-state") !== "streaming";
    }, i - 1);
    const state = await reply.getAttribute("data-state");
    const meta = await reply.locator(".meta").innerText();
    assert.equal(state, "complete", `turn ${i} ended ${state}: ${await reply.locator(".bubble").innerText()}`);
    await page.locator("#context-use", { hasText: "tokens of context" }).waitFor();
    await page.waitForFunction(() => !document.querySelector("#send").disabled);
    const use = (await page.locator("#context-use").innerText()).trim();
    const m = use.match(/^(\d+) \/ (\d+) tokens of context(?: · (\d+) earlier messages? left out)?$/);
    assert.ok(m, `turn ${i}: the context line reads ${JSON.stringify(use)}`);
    const [used, size, dropped] = [Number(m[1]), Number(m[2]), Number(m[3] || 0)];
    assert.ok(used <= size, `turn ${i}: ${used} tokens used of a context of ${size}`);
    const evaluated = Number(await page.locator("#context-use").getAttribute("data-evaluated"));
    const title = (await page.locator("#context-use").getAttribute("title")) || "";
    const e = title.match(/^The engine evaluated (\d+) of the prompt's (\d+) tokens; (\d+) came from its cache/);
    assert.ok(e && Number(e[1]) === evaluated, `turn ${i}: the context line's title reads ${JSON.stringify(title)} (data-evaluated ${evaluated})`);
    const prompt = Number(e[2]);
    const t = meta.match(/TTFT (\d+) ms/);
    assert.ok(t, `turn ${i}: no TTFT in the reply footer ${JSON.stringify(meta)}`);
    ttft.push(Number(t[1]));
    uses.push({ used, size, dropped, prompt, evaluated });
  }
  console.log(`# TTFT ms per turn: ${ttft.join(" ")}`);
  console.log(`# context used per turn: ${uses.map((u) => `${u.used}/${u.size}${u.dropped ? `-${u.dropped}` : ""}`).join(" ")}`);
  console.log(`# prompt tokens evaluated/sent per turn: ${uses.map((u) => `${u.evaluated}/${u.prompt}`).join(" ")}`);
  assert.ok(uses.some((u) => u.dropped > 0), "the context was never full: make the turns longer so the rolling window is tested");
  assert.equal(await page.locator('.msg.assistant[data-state="error"]').count(), 0);
  // A turn that rolls changes the prompt's front and is evaluated in full, once; the turns are
  // sized so the window rolls every fifth turn and the 20th is not one of them.
  assert.equal(uses[19].dropped, uses[18].dropped, `turn 20 rolled the window (${JSON.stringify(uses.slice(17))}): resize the turns so it does not`);
  // A turn that does not roll repeats the whole kept history; the prefix cache evaluates only what
  // is new since the last prompt (the last reply, the template's few tokens, the new message).
  // A turn that rolls drops messages at the prompt's front, so nearly all of it is evaluated.
  for (let i = 1; i < uses.length; i++) {
    const [prev, cur] = [uses[i - 1], uses[i]];
    const fresh = cur.prompt - prev.prompt;
    if (cur.dropped === prev.dropped) {
      assert.ok(cur.evaluated <= fresh + 2 && cur.evaluated * 2 < cur.prompt,
        `turn ${i + 1} evaluated ${cur.evaluated} of ${cur.prompt} prompt tokens; only ${fresh} are new since turn ${i}: the prefix cache missed`);
    } else {
      assert.ok(cur.evaluated * 2 > cur.prompt,
        `turn ${i + 1} rolled the window yet evaluated only ${cur.evaluated} of ${cur.prompt} prompt tokens`);
    }
  }
});
