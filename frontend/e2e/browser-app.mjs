// What the browser-mode end-to-end tests share: where the app binary and Debian's Chromium are,
// the Chromium flags this machine needs, starting/stopping the app in browser mode, and opening
// headless Chromium with its first page.
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { resolve } from "node:path";
import { chromium } from "playwright-core";

const here = new URL(".", import.meta.url).pathname;

// appBin is the app binary under test: VKLLM_APP (relative to frontend/) or the default build.
export const appBin = resolve(here, "..", process.env.VKLLM_APP || "../build/bin/vkllm-app");
export const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
export const chromiumFlags = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

// startApp runs the app in browser mode with its store in dataDir, and extraEnv added to its
// environment (and so its engine sidecar's), and resolves with { proc, url } once it prints the
// URL it serves.
export function startApp(dataDir, extraEnv = {}) {
  return new Promise((resolveStart, reject) => {
    const env = { ...process.env, ...extraEnv, VKLLM_DATA_DIR: dataDir };
    delete env.DISPLAY;
    delete env.WAYLAND_DISPLAY;
    const proc = spawn(appBin, ["--browser", "--listen", "127.0.0.1:0"], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    const timer = setTimeout(() => reject(new Error(`app printed no URL within 60 s\nstdout: ${out}\nstderr: ${err}`)), 60_000);
    proc.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/http:\/\/127\.0\.0\.1:\d+\//);
      if (m) {
        clearTimeout(timer);
        resolveStart({ proc, url: m[0] });
      }
    });
    proc.stderr.on("data", (d) => (err += d));
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`app exited with ${code} before serving\nstdout: ${out}\nstderr: ${err}`));
    });
  });
}

// stopApp ends an app started by startApp: SIGTERM, then SIGKILL after 10 s.
export function stopApp(s) {
  return new Promise((done) => {
    if (!s || s.proc.exitCode !== null) return done();
    s.proc.on("exit", () => done());
    s.proc.kill("SIGTERM");
    setTimeout(() => s.proc.kill("SIGKILL"), 10_000).unref();
  });
}

// closeApp closes the browser context, stops the app and removes the test's folders: every
// test file's teardown.
export async function closeApp(context, server, ...dirs) {
  await context?.close();
  await stopApp(server);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}

// waitIdle waits until no reply is streaming and the composer can send again.
export async function waitIdle(page) {
  await page.waitForFunction(() => !document.querySelector('.msg[data-state="streaming"]') && !document.querySelector("#send").disabled);
}

// openBrowser starts headless Chromium with a fresh profile in profileDir (extra launch options
// such as a viewport merged in) and resolves with { context, page }: the first page, its default
// timeout 60 s.
export async function openBrowser(profileDir, options = {}) {
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: chromiumPath,
    headless: true,
    args: chromiumFlags,
    ...options,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(60_000);
  return { context, page };
}
