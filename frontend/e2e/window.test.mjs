// Smoke test of the real desktop window: the Wails build (WebKitGTK) under a private Xvfb server.
// It waits for the window, screenshots the screen, clicks into the composer, types a message and
// checks the window changed as the reply came in.
//
//   VKLLM_APP=../build/bin/vkllm-app node --test e2e/window.test.mjs
//
// Needs Xvfb, xdotool and ImageMagick (import, convert, compare). WINDOW_SHOT=path keeps the
// screenshot with the reply (the README's docs/screenshot.png comes from here).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { appBin } from "./browser-app.mjs";
import { XScreen, waitFor, differingPixels } from "./xwindow.mjs";

const work = mkdtempSync(join(tmpdir(), "vkllm-window-"));
let screen;
let app;

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  screen = await XScreen.start(work);
  app = screen.startApp(appBin, { VKLLM_DATA_DIR: join(work, "data") });
});

after(async () => {
  await screen?.stop(app);
  rmSync(work, { recursive: true, force: true });
});

test("the desktop window opens, draws, and answers a message typed into it", async () => {
  const id = await screen.window("^vkllm$", 90_000, app.log);
  assert.match(id, /^\d+$/);
  const geometry = screen.run("xdotool", ["getwindowgeometry", id]);
  const [w, h] = geometry.match(/Geometry: (\d+)x(\d+)/).slice(1).map(Number);
  assert.ok(w >= 600 && h >= 400, `window is ${w}x${h}`);

  // The page has loaded once the screen is no longer one flat colour.
  const first = await waitFor("the window drawing its UI", () => {
    const p = screen.shot("first.png");
    return screen.spread(p) > 0.02 ? p : null;
  }, 60_000, { log: app.log });

  // Click into the composer (bottom centre of the window) and send a message.
  screen.run("xdotool", ["windowfocus", "--sync", id]); // no window manager under Xvfb, so focus rather than activate
  screen.run("xdotool", ["mousemove", "--window", id, String(Math.round(w / 2 + 130)), String(h - 45), "click", "1"]);
  await sleep(300);
  screen.run("xdotool", ["type", "--delay", "20", "Once upon a time"]);
  screen.run("xdotool", ["key", "Return"]);

  // The reply streams into the window: the screen changes well beyond the typed line.
  const after = await waitFor("the reply appearing in the window", () => {
    const p = screen.shot("after.png");
    return differingPixels(first, p) > 20_000 ? p : null;
  }, 60_000, { log: app.log });
  await sleep(1500); // let the reply finish so the kept screenshot shows its speed line
  const final = screen.shot("final.png");
  assert.ok(screen.spread(final) > 0.02, "the final screenshot is blank");
  assert.ok(app.proc.exitCode === null, `the app exited:\n${app.log()}`);
  if (process.env.WINDOW_SHOT) {
    // Keep just the window: its geometry from xdotool, cut out of the root screenshot.
    const pos = screen.run("xdotool", ["getwindowgeometry", id]).match(/Position: (\d+),(\d+)/).slice(1);
    screen.run("convert", [final, "-crop", `${w}x${h}+${pos[0]}+${pos[1]}`, "+repage", process.env.WINDOW_SHOT]);
  }
  assert.ok(after);
});
