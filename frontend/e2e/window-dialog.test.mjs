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
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const here = new URL(".", import.meta.url).pathname;
const appBin = resolve(here, "..", process.env.VKLLM_APP || "../build/bin/vkllm-app");
const cli = resolve(here, "..", process.env.VKLLM_CLI || "../bin/vkllm");
const work = mkdtempSync(join(tmpdir(), "vkllm-window-dialog-"));
const home = join(work, "home");
const model = join(home, "models", "picked.gguf");
let xvfb;
let appProc;
let display = "";
let appLog = "";

function run(cmd, args) {
  return execFileSync(cmd, args, { env: { ...process.env, DISPLAY: display }, encoding: "utf8" }).trim();
}

function startXvfb() {
  return new Promise((done, reject) => {
    const p = spawn("Xvfb", ["-displayfd", "3", "-screen", "0", "1280x800x24", "-nolisten", "tcp"], { stdio: ["ignore", "ignore", "pipe", "pipe"] });
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
    await sleep(300);
  }
  throw new Error(`${what} did not happen within ${timeoutMs / 1000} s (${last?.message ?? "no error"})\napp log:\n${appLog}`);
}

// spread is the standard deviation of the screen's pixels: 0 while nothing is drawn.
function spread() {
  const p = join(work, "screen.png");
  run("import", ["-window", "root", p]);
  return Number(run("convert", [p, "-colorspace", "Gray", "-format", "%[fx:standard_deviation]", "info:"]));
}

const recent = () => execFileSync("sqlite3", [join(work, "data", "vkllm.db"), "SELECT path FROM recent_models ORDER BY opened_at_ms DESC LIMIT 1"], { encoding: "utf8" }).trim();

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  assert.ok(existsSync(cli), `CLI ${cli} is missing: run make build first`);
  mkdirSync(join(home, "models"), { recursive: true });
  execFileSync(cli, ["synth", "-o", model, "-arch", "llama", "-type", "q8_0"], { stdio: "pipe" });
  xvfb = await startXvfb();
  const env = {
    ...process.env, DISPLAY: display, HOME: home, VKLLM_DATA_DIR: join(work, "data"),
    WEBKIT_DISABLE_COMPOSITING_MODE: "1", LIBGL_ALWAYS_SOFTWARE: "1", GTK_USE_PORTAL: "0",
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

test("Ctrl+O shows the native file dialog, and the file picked in it opens", async () => {
  const id = await waitFor("the vkllm window appearing", () => run("xdotool", ["search", "--onlyvisible", "--name", "^vkllm$"]).split("\n")[0], 90_000);
  await waitFor("the window drawing its UI", () => spread() > 0.02, 60_000);
  await sleep(1000); // the page's services and shortcuts are wired once it has drawn
  run("xdotool", ["windowfocus", "--sync", id]);
  run("xdotool", ["key", "ctrl+o"]);
  const dialog = await waitFor("the file dialog appearing", () => run("xdotool", ["search", "--onlyvisible", "--name", "Open a GGUF model"]).split("\n")[0], 30_000);
  run("xdotool", ["windowfocus", "--sync", dialog]);
  await sleep(500);
  run("xdotool", ["key", "ctrl+l"]);
  await sleep(300);
  run("xdotool", ["type", "--delay", "15", model]);
  await sleep(300);
  run("xdotool", ["key", "Return"]);
  await waitFor("the file dialog closing", () => {
    try {
      return run("xdotool", ["search", "--onlyvisible", "--name", "Open a GGUF model"]) === "";
    } catch {
      return true; // xdotool exits 1 when nothing matches
    }
  }, 20_000);
  // The window plans the pick and focuses Open: Enter opens it.
  run("xdotool", ["windowfocus", "--sync", id]);
  await sleep(1500);
  run("xdotool", ["key", "Return"]);
  await waitFor("the picked model opening (the recent list in the store)", () => recent() === model, 60_000);
  assert.ok(appProc.exitCode === null, `the app exited:\n${appLog}`);
});
