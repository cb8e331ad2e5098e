// End-to-end: replies render as markdown, and hostile model output stays inert. The real app runs
// in browser mode with e2e/echo-engine.mjs as its engine (VKLLM_SIDECAR), which streams the last
// user message back as the reply, so each test types the model's output.
//
//   VKLLM_APP=../build/bin/vkllm-app node --test e2e/markdown.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { appBin, chromiumPath, chromiumFlags, startApp, closeApp } from "./browser-app.mjs";

const echoEngine = new URL("./echo-engine.mjs", import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), "vkllm-md-data-"));
const profileDir = mkdtempSync(join(tmpdir(), "vkllm-md-chromium-"));
let server;
let context;
let page;
const requests = []; // every URL the page asked for

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  server = await startApp(dataDir, { VKLLM_SIDECAR: echoEngine });
  context = await chromium.launchPersistentContext(profileDir, { executablePath: chromiumPath, headless: true, args: chromiumFlags });
  // Record what the page copies and opens, and anything a payload manages to run.
  await context.addInitScript(() => {
    window.__copied = [];
    window.__opened = [];
    Object.defineProperty(navigator, "clipboard", { value: { writeText: async (t) => void window.__copied.push(t) } });
    window.open = (url) => void window.__opened.push(String(url));
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(30_000);
  page.on("request", (r) => requests.push(r.url()));
  await page.goto(server.url);
  await page.locator("#model-name", { hasText: "echo.gguf" }).waitFor();
});

after(() => closeApp(context, server, dataDir, profileDir));

// ask sends text as the user and waits for the echoed reply to complete; it returns its bubble.
let turns = 0;
async function ask(text) {
  await page.locator("#composer-input").fill(text);
  await page.locator("#composer-input").press("Enter");
  const reply = page.locator('.msg.assistant[data-state="complete"]').nth(turns++);
  await reply.waitFor();
  return reply.locator(".bubble");
}

test("a reply renders as markdown, with a highlighted code block whose button copies it", async () => {
  const code = 'func main() {\n\tfmt.Println("hi")\n}';
  const bubble = await ask(`# Plan\n\nSome **bold** text and \`inline\` code.\n\n- one\n- two\n\n\`\`\`go\n${code}\n\`\`\``);
  assert.equal(await bubble.locator("h1").innerText(), "Plan");
  assert.equal(await bubble.locator("strong").innerText(), "bold");
  assert.equal(await bubble.locator("li").count(), 2);
  const block = bubble.locator("pre code.hljs.language-go");
  assert.equal(await block.textContent(), code);
  assert.ok((await block.locator("span[class^='hljs-']").count()) > 0, "the go code has no highlight spans");
  // The user's own message stays plain text.
  assert.equal(await page.locator(".msg.user .bubble h1").count(), 0);
  await bubble.locator("pre .copy-code").click();
  await page.waitForFunction(() => window.__copied.length > 0);
  assert.deepEqual(await page.evaluate(() => window.__copied), [code]);
});

test("script, event handlers, javascript: links, iframes, remote images and forms in a reply are inert", async () => {
  const urlBefore = page.url();
  const payload = [
    "<script>window.__pwned = 'script'</script>",
    '<img src=x onerror="window.__pwned = \'img\'">',
    '<iframe src="http://evil.test/frame"></iframe>',
    '<svg><image href="http://evil.test/svg.png" /></svg><svg onload="window.__pwned = \'svg\'"></svg>',
    "<style>body { background: url(http://evil.test/bg.png) }</style>",
    '<form action="http://evil.test/form"><button>go</button></form>',
    '<a href="http://evil.test/raw">a raw link</a>',
    "",
    "[a js link](javascript:window.__pwned='link') and [a data link](data:text/html,hi)",
    "",
    "![remote](http://evil.test/pixel.png)",
    "",
    "[a web link](http://evil.test/page) and <http://evil.test/auto>",
  ].join("\n");
  const bubble = await ask(payload);
  await sleep(300); // time for a handler or a fetch to fire
  const messages = page.locator("#messages");
  for (const tag of ["script", "img", "iframe", "svg", "style", "form", "object", "embed", "image"]) {
    assert.equal(await messages.locator(tag).count(), 0, `a <${tag}> reached the page`);
  }
  const handlers = await page.evaluate(() =>
    Array.from(document.querySelectorAll("#messages *")).flatMap((el) => el.getAttributeNames().filter((a) => /^on/i.test(a) || a === "style")),
  );
  assert.deepEqual(handlers, []);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  // Raw HTML shows as the text the model wrote.
  assert.match(await bubble.innerText(), /<script>window\.__pwned = 'script'<\/script>/);
  // Only the http links keep a target, and they open outside the window, never in it.
  const links = await bubble.locator("a").evaluateAll((as) => as.map((a) => [a.textContent, a.getAttribute("href"), a.getAttribute("target"), a.getAttribute("rel")]));
  assert.deepEqual(links, [
    ["a js link", null, null, null],
    ["a data link", null, null, null],
    ["a web link", "http://evil.test/page", "_blank", "noopener noreferrer"],
    ["http://evil.test/auto", "http://evil.test/auto", "_blank", "noopener noreferrer"],
  ]);
  for (const text of ["a js link", "a data link", "a web link", "http://evil.test/auto"]) {
    await bubble.locator("a", { hasText: text }).click();
  }
  await sleep(300);
  assert.equal(page.url(), urlBefore, "a click in a reply navigated the window");
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(await page.evaluate(() => window.__opened), ["http://evil.test/page", "http://evil.test/auto"]);
  assert.equal(context.pages().length, 1, "a link opened a page inside the browser context");
  assert.deepEqual(requests.filter((u) => u.includes("evil.test")), [], "a request left for the payloads' host");
  assert.equal(await bubble.locator(".md-image").innerText(), "[image: remote]");
});

test("a streamed reply keeps the reader's scroll position once they scroll up", async () => {
  // A reply long enough to scroll and to stream for a second; scroll up while it streams.
  await page.locator("#composer-input").fill(Array.from({ length: 60 }, (_, i) => `line ${i}`).join("\n") + "\n\n```\nplain code\n```");
  await page.locator("#composer-input").press("Enter");
  await page.waitForFunction(() => (document.querySelector('.msg.assistant[data-state="streaming"] .bubble')?.textContent ?? "").includes("line 3"));
  const messages = page.locator("#messages");
  assert.ok(await messages.evaluate((el) => el.scrollHeight > el.clientHeight + 100), "the list does not scroll");
  await messages.evaluate((el) => (el.scrollTop = 0));
  const reply = page.locator('.msg.assistant[data-state="complete"]').nth(turns++);
  await reply.waitFor();
  assert.equal(await messages.evaluate((el) => el.scrollTop), 0, "the list scrolled while the reader was reading above");
  assert.equal(await reply.locator("pre code.hljs").textContent(), "plain code");
});
