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
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const here = new URL(".", import.meta.url).pathname;
const appBin = resolve(here, "..", process.env.VKLLM_APP || "../build/bin/vkllm-app");
const work = mkdtempSync(join(tmpdir(), "vkllm-window-"));
let xvfb;
let appProc;
let display = "";
let appLog = "";

function run(cmd, args) {
  return execFileSync(cmd, args, { env: { ...process.env, DISPLAY: display }, encoding: "utf8" }).trim();
}

// startXvfb lets Xvfb pick a free display and print its number on fd 3.
function startXvfb() {
  return new Promise((done, reject) => {
    const p = spawn("Xvfb", ["-displayfd", "3", "-screen", "0", "1280x800x24", "-nolisten", "tcp"], {
      stdio: ["ignore", "ignore", "pipe", "pipe"],
    });
    let out = "";
    const timer = setTimeout(() => reject(new Error("Xvfb printed no display within 20 s")), 20_000);
    p.stdio[3].on("data", (d) => {
      out += d;
      if (out.includes("\n")) {
        clearTimeout(timer);
        display = ":" + out.trim();
        done(p);
      }
    });
    p.on("exit", (code) => reject(new Error(`Xvfb exited with ${code}`)));
  });
}

async function waitFor(what, fn, timeoutMs) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      const v = fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await sleep(500);
  }
  throw new Error(`${what} did not happen within ${timeoutMs / 1000} s (${last?.message ?? "no error"})\napp log:\n${appLog}`);
}

function shot(name) {
  const path = join(work, name);
  run("import", ["-window", "root", path]);
  return path;
}

// spread is the standard deviation of the screenshot's pixels: 0 for a blank screen.
function spread(path) {
  return Number(run("convert", [path, "-colorspace", "Gray", "-format", "%[fx:standard_deviation]", "info:"]));
}

// differingPixels counts the pixels that changed between two screenshots.
function differingPixels(a, b) {
  try {
    return Number(execFileSync("compare", ["-metric", "AE", a, b, "null:"], { stdio: ["ignore", "ignore", "pipe"] }));
  } catch (e) {
    return Number(String(e.stderr).trim().split(/\s/)[0]); // compare exits 1 when the images differ
  }
}

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  xvfb = await startXvfb();
  const env = {
    ...process.env,
    DISPLAY: display,
    VKLLM_DATA_DIR: join(work, "data"),
    // No GPU and no compositor under Xvfb: let WebKit draw in software.
    WEBKIT_DISABLE_COMPOSITING_MODE: "1",
    LIBGL_ALWAYS_SOFTWARE: "1",
  };
  delete env.WAYLAND_DISPLAY;
  appProc = spawn(appBin, [], { env, stdio: ["ignore", "pipe", "pipe"] });
  appProc.stdout.on("data", (d) => (appLog += d));
  appProc.stderr.on("data", (d) => (appLog += d));
});

after(async () => {
  appProc?.kill("SIGTERM");
  await sleep(500);
  appProc?.kill("SIGKILL");
  xvfb?.kill("SIGTERM");
  rmSync(work, { recursive: true, force: true });
});

test("the desktop window opens, draws, and answers a message typed into it", async () => {
  const id = await waitFor("the vkllm window appearing", () => run("xdotool", ["search", "--onlyvisible", "--name", "^vkllm$"]).split("\n")[0], 90_000);
  assert.match(id, /^\d+$/);
  const geometry = run("xdotool", ["getwindowgeometry", id]);
  const [w, h] = geometry.match(/Geometry: (\d+)x(\d+)/).slice(1).map(Number);
  assert.ok(w >= 600 && h >= 400, `window is ${w}x${h}`);

  // The page has loaded once the screen is no longer one flat colour.
  const first = await waitFor("the window drawing its UI", () => {
    const p = shot("first.png");
    return spread(p) > 0.02 ? p : null;
  }, 60_000);

  // Click into the composer (bottom centre of the window) and send a message.
  run("xdotool", ["windowfocus", "--sync", id]); // no window manager under Xvfb, so focus rather than activate
  run("xdotool", ["mousemove", "--window", id, String(Math.round(w / 2 + 130)), String(h - 45), "click", "1"]);
  await sleep(300);
  run("xdotool", ["type", "--delay", "20", "Once upon a time"]);
  run("xdotool", ["key", "Return"]);

  // The reply streams into the window: the screen changes well beyond the typed line.
  const after = await waitFor("the reply appearing in the window", () => {
    const p = shot("after.png");
    return differingPixels(first, p) > 20_000 ? p : null;
  }, 60_000);
  await sleep(1500); // let the reply finish so the kept screenshot shows its speed line
  const final = shot("final.png");
  assert.ok(spread(final) > 0.02, "the final screenshot is blank");
  assert.ok(appProc.exitCode === null, `the app exited:\n${appLog}`);
  if (process.env.WINDOW_SHOT) {
    // Keep just the window: its geometry from xdotool, cut out of the root screenshot.
    const pos = run("xdotool", ["getwindowgeometry", id]).match(/Position: (\d+),(\d+)/).slice(1);
    run("convert", [final, "-crop", `${w}x${h}+${pos[0]}+${pos[1]}`, "+repage", process.env.WINDOW_SHOT]);
  }
  assert.ok(after);
});
