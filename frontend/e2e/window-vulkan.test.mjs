// The real desktop window on Vulkan with a rendered markdown reply: the README's
// docs/screenshot-chat-vulkan.png comes from here (`make screenshot`).
//
// The app runs with a 512 MiB VRAM pin, which the resident plan arms for the embedded model on
// whatever Vulkan device there is (Mesa's lavapipe on a machine without a GPU). A browser-mode
// start with the same settings first checks the placement the header shows (resident on vulkan:
// the window has no DOM to read) and creates the store; a conversation is then written into the
// store with a markdown reply (a list and a Go code block: the embedded 260K-parameter story model
// writes no markdown itself). The window opens it from the keyboard (Ctrl+K, Tab, Enter), a
// message typed into the composer is answered by the embedded model on Vulkan, and the window is
// kept as a PNG once the reply is saved.
//
//   VKLLM_APP=../build/bin/vkllm-app WINDOW_SHOT=../docs/screenshot-chat-vulkan.png node --test e2e/window-vulkan.test.mjs
//
// Needs Xvfb, xdotool, ImageMagick (import, convert) and sqlite3.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, existsSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { appBin, startApp, stopApp } from "./browser-app.mjs";
import { XScreen, waitFor } from "./xwindow.mjs";

const work = mkdtempSync(join(tmpdir(), "vkllm-window-vulkan-"));
const dataDir = join(work, "data");
const db = join(dataDir, "vkllm.db");
// The pin arms the resident plan; the placement settings a developer's shell may hold are cleared.
const placementEnv = { VKLLM_GPU_VRAM_MB: "512", VKLLM_GPU_RESIDENT: "1", VKLLM_DEVICE: "" };
let screen;
let app;

function sql(statement) {
  return execFileSync("sqlite3", [db, statement], { encoding: "utf8" }).trim();
}

const q = (s) => "'" + s.replaceAll("'", "''") + "'";

const markdownReply = `Markdown renders in a reply:

- **bold**, *italic* and \`inline code\`
- a link, which opens outside the app: [vkllm](https://example.com)

\`\`\`go
func Greet(name string) string {
	return "Hello, " + name + "!"
}
\`\`\``;

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
});

after(async () => {
  await screen?.stop(app);
  rmSync(work, { recursive: true, force: true });
});

test("with a 512 MiB pin the app places the embedded model resident on Vulkan", async () => {
  const server = await startApp(dataDir, placementEnv);
  try {
    const r = await fetch(server.url + "api/ModelService/Current", { method: "POST", headers: { "Content-Type": "application/json" }, body: "[]" });
    const { result: info } = await r.json();
    assert.equal(info.backend, "vulkan", `the model runs on ${JSON.stringify(info)}: a Vulkan device is needed (mesa-vulkan-drivers gives lavapipe)`);
    assert.equal(info.placement, "resident");
  } finally {
    await stopApp(server);
  }
});

test("the window shows a rendered markdown reply and answers on Vulkan", async () => {
  // A conversation with a markdown reply, and settings that keep the next reply short and greedy.
  const now = Date.now();
  const settings = JSON.stringify({ systemPrompt: "", maxTokens: 48, sampling: { temperature: 0 } });
  const conv = sql(
    `INSERT INTO conversations(title, model, created_at_ms, updated_at_ms, settings) VALUES ('Markdown on Vulkan', 'stories260K.gguf', ${now}, ${now}, ${q(settings)}) RETURNING id`,
  );
  sql(`INSERT INTO messages(conversation_id, role, content, state, model, created_at_ms) VALUES
    (${conv}, 'user', 'Show me a list and a code block.', 'complete', 'stories260K.gguf', ${now}),
    (${conv}, 'assistant', ${q(markdownReply)}, 'complete', 'stories260K.gguf', ${now + 1})`);

  screen = await XScreen.start(work);
  app = screen.startApp(appBin, { ...placementEnv, VKLLM_DATA_DIR: dataDir });

  const id = await screen.window("^vkllm$", 90_000, app.log);
  const geometry = screen.run("xdotool", ["getwindowgeometry", id]);
  const [w, h] = geometry.match(/Geometry: (\d+)x(\d+)/).slice(1).map(Number);
  await waitFor("the window drawing its UI", () => screen.spread(screen.shot("first.png")) > 0.02, 60_000, { log: app.log });
  await sleep(1000);

  // Open the conversation from the keyboard: Ctrl+K focuses the search, Tab the first row.
  screen.run("xdotool", ["windowfocus", "--sync", id]); // no window manager under Xvfb, so focus rather than activate
  screen.run("xdotool", ["mousemove", "--window", id, String(Math.round(w / 2)), String(Math.round(h / 2)), "click", "1"]);
  screen.run("xdotool", ["key", "ctrl+k"]);
  await sleep(300);
  screen.run("xdotool", ["key", "Tab"]);
  screen.run("xdotool", ["key", "Return"]);
  await sleep(1500);

  // Send a message from the composer (bottom centre of the window).
  screen.run("xdotool", ["mousemove", "--window", id, String(Math.round(w / 2 + 130)), String(h - 45), "click", "1"]);
  await sleep(300);
  screen.run("xdotool", ["type", "--delay", "20", "Once upon a time"]);
  screen.run("xdotool", ["key", "Return"]);

  // The reply is saved complete in this conversation (the window has no HTTP API: the store says).
  await waitFor(
    "the reply being saved",
    () => sql(`SELECT count(*) FROM messages WHERE conversation_id = ${conv} AND role = 'assistant' AND state = 'complete'`) === "2",
    180_000,
    { log: app.log },
  );
  const reply = sql(`SELECT content FROM messages WHERE conversation_id = ${conv} AND role = 'assistant' ORDER BY id DESC LIMIT 1`);
  assert.ok(reply.length > 0, "the reply is empty");
  assert.equal(sql(`SELECT count(*) FROM messages WHERE conversation_id = ${conv} AND role = 'user'`), "2", "the message went to another conversation");
  await sleep(1500); // the finished event draws the reply's speed line
  const final = screen.shot("final.png");
  assert.ok(screen.spread(final) > 0.02, "the final screenshot is blank");
  assert.ok(app.proc.exitCode === null, `the app exited:\n${app.log()}`);
  if (process.env.WINDOW_SHOT) {
    // Just the window, cut out of the root screenshot, as a palette PNG (the README's stays small).
    const pos = screen.run("xdotool", ["getwindowgeometry", id]).match(/Position: (\d+),(\d+)/).slice(1);
    screen.run("convert", [final, "-crop", `${w}x${h}+${pos[0]}+${pos[1]}`, "+repage", "-strip", "-colors", "256", `PNG8:${process.env.WINDOW_SHOT}`]);
    const kb = statSync(process.env.WINDOW_SHOT).size / 1024;
    assert.ok(kb < 300, `the screenshot has ${kb.toFixed(0)} KB: keep it under 300`);
  }
});
