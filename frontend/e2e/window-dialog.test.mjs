// The native file dialog of the real desktop window (Wails, WebKitGTK) under a private Xvfb:
// Ctrl+O shows GTK's file chooser, the test types a model's path into it (Ctrl+L, the path,
// Enter), the window plans the file and focuses Open, Enter opens it; the model then tops the
// recent list in the app's store (read with sqlite3, as the window has no HTTP API).
//
//   VKLLM_APP=../build/bin/vkllm-app VKLLM_CLI=../bin/vkllm node --test e2e/window-dialog.test.mjs
//
// Needs Xvfb, xdotool, ImageMagick's import and sqlite3.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { appBin } from "./browser-app.mjs";
import { XScreen, waitFor } from "./xwindow.mjs";

const here = new URL(".", import.meta.url).pathname;
const cli = resolve(here, "..", process.env.VKLLM_CLI || "../bin/vkllm");
const work = mkdtempSync(join(tmpdir(), "vkllm-window-dialog-"));
const home = join(work, "home");
const model = join(home, "models", "picked.gguf");
let screen;
let app;

// drawn says whether the screen shows more than one flat colour.
const drawn = () => screen.spread(screen.shot("screen.png")) > 0.02;

const recent = () => execFileSync("sqlite3", [join(work, "data", "vkllm.db"), "SELECT path FROM recent_models ORDER BY opened_at_ms DESC LIMIT 1"], { encoding: "utf8" }).trim();

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  assert.ok(existsSync(cli), `CLI ${cli} is missing: run make build first`);
  mkdirSync(join(home, "models"), { recursive: true });
  execFileSync(cli, ["synth", "-o", model, "-arch", "llama", "-type", "q8_0"], { stdio: "pipe" });
  screen = await XScreen.start(work);
  app = screen.startApp(appBin, { HOME: home, VKLLM_DATA_DIR: join(work, "data"), GTK_USE_PORTAL: "0" });
});

after(async () => {
  await screen?.stop(app);
  rmSync(work, { recursive: true, force: true });
});

test("Ctrl+O shows the native file dialog, and the file picked in it opens", async () => {
  const id = await screen.window("^vkllm$", 90_000, app.log);
  await waitFor("the window drawing its UI", drawn, 60_000, { everyMs: 300, log: app.log });
  await sleep(1000); // the page's services and shortcuts are wired once it has drawn
  screen.run("xdotool", ["windowfocus", "--sync", id]);
  screen.run("xdotool", ["key", "ctrl+o"]);
  const dialog = await screen.window("Open a GGUF model", 30_000, app.log);
  screen.run("xdotool", ["windowfocus", "--sync", dialog]);
  await sleep(500);
  screen.run("xdotool", ["key", "ctrl+l"]);
  await sleep(300);
  screen.run("xdotool", ["type", "--delay", "15", model]);
  await sleep(300);
  screen.run("xdotool", ["key", "Return"]);
  await waitFor("the file dialog closing", () => {
    try {
      return screen.run("xdotool", ["search", "--onlyvisible", "--name", "Open a GGUF model"]) === "";
    } catch {
      return true; // xdotool exits 1 when nothing matches
    }
  }, 20_000, { everyMs: 300, log: app.log });
  // The window plans the pick and focuses Open: Enter opens it.
  screen.run("xdotool", ["windowfocus", "--sync", id]);
  await sleep(1500);
  screen.run("xdotool", ["key", "Return"]);
  await waitFor("the picked model opening (the recent list in the store)", () => recent() === model, 60_000, { everyMs: 300, log: app.log });
  assert.ok(app.proc.exitCode === null, `the app exited:\n${app.log()}`);
});
