// What the desktop-window tests share: a private Xvfb screen, the real app started on it (the
// Wails build, WebKitGTK drawing in software), commands run against that screen, screenshots
// and their measures, and waiting for something to happen.
import { spawn, execFileSync } from "node:child_process";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

// XScreen is one Xvfb server; its screenshots are written under work.
export class XScreen {
  constructor(proc, display, work) {
    this.proc = proc;
    this.display = display;
    this.work = work;
  }

  // start lets Xvfb pick a free display and print its number on fd 3.
  static start(work) {
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
          done(new XScreen(p, ":" + out.trim(), work));
        }
      });
      p.on("exit", (code) => reject(new Error(`Xvfb exited with ${code}`)));
    });
  }

  // run runs a command (xdotool, import, convert) on this screen and returns its trimmed output.
  run(cmd, args) {
    return execFileSync(cmd, args, { env: { ...process.env, DISPLAY: this.display }, encoding: "utf8" }).trim();
  }

  // shot screenshots the whole screen into work/name and returns the path.
  shot(name) {
    const path = join(this.work, name);
    this.run("import", ["-window", "root", path]);
    return path;
  }

  // spread is the standard deviation of a screenshot's pixels: 0 for a blank screen.
  spread(path) {
    return Number(this.run("convert", [path, "-colorspace", "Gray", "-format", "%[fx:standard_deviation]", "info:"]));
  }

  // startApp runs the app's desktop window on this screen with env added to the environment;
  // app.log() is what it has printed so far.
  startApp(appBin, env = {}) {
    const full = {
      ...process.env,
      ...env,
      DISPLAY: this.display,
      // No GPU and no compositor under Xvfb: let WebKit draw in software.
      WEBKIT_DISABLE_COMPOSITING_MODE: "1",
      LIBGL_ALWAYS_SOFTWARE: "1",
    };
    delete full.WAYLAND_DISPLAY;
    const proc = spawn(appBin, [], { env: full, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    proc.stdout.on("data", (d) => (out += d));
    proc.stderr.on("data", (d) => (out += d));
    return { proc, log: () => out };
  }

  // window waits for a visible window titled title (a regular expression) and returns its id.
  window(title, timeoutMs, log = () => "") {
    return waitFor(`the window ${title} appearing`, () => this.run("xdotool", ["search", "--onlyvisible", "--name", title]).split("\n")[0], timeoutMs, { log });
  }

  // stop ends the app (if any) and the server.
  async stop(app) {
    app?.proc.kill("SIGTERM");
    await sleep(500);
    app?.proc.kill("SIGKILL");
    this.proc.kill("SIGTERM");
  }
}

// waitFor calls fn every everyMs until it returns something truthy, and returns that; past
// timeoutMs it throws, naming what did not happen, fn's last error and log() (the app's output).
export async function waitFor(what, fn, timeoutMs, { everyMs = 500, log = () => "" } = {}) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      const v = fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await sleep(everyMs);
  }
  throw new Error(`${what} did not happen within ${timeoutMs / 1000} s (${last?.message ?? "no error"})\napp log:\n${log()}`);
}

// differingPixels counts the pixels that changed between two screenshots.
export function differingPixels(a, b) {
  try {
    return Number(execFileSync("compare", ["-metric", "AE", a, b, "null:"], { stdio: ["ignore", "ignore", "pipe"] }));
  } catch (e) {
    return Number(String(e.stderr).trim().split(/\s/)[0]); // compare exits 1 when the images differ
  }
}
