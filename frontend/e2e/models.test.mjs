// End-to-end: opening and discovering models. The real app binary in browser mode with its real
// sidecar, HOME set to a temporary folder laid out the way LM Studio and Ollama keep their models
// (files written by `vkllm synth`, our GGUF writer, and a fake Ollama manifest naming a blob): a
// model opens from a path typed with ~, the library's scan lists every model with the plan's
// verdict for this machine's GPU (lavapipe without one) before anything is loaded, a file cut
// inside its header is listed with the reason, a download cut after its header still plans, and
// unload and "back to the embedded model" work.
//
//   VKLLM_APP=../build/bin/vkllm-app node --test e2e/models.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { appBin, openBrowser, startApp, closeApp } from "./browser-app.mjs";

const here = new URL(".", import.meta.url).pathname;
// The CLI writes the models (`make build` builds it beside the app).
const cli = resolve(here, "..", process.env.VKLLM_CLI || "../bin/vkllm");

const dataDir = mkdtempSync(join(tmpdir(), "vkllm-e2e-models-data-"));
const profileDir = mkdtempSync(join(tmpdir(), "vkllm-e2e-models-chromium-"));
const home = mkdtempSync(join(tmpdir(), "vkllm-e2e-models-home-"));
// The tools' own variables would move their folders out of HOME; placement settings would move
// the verdicts.
const env = {
  HOME: home, XDG_CACHE_HOME: "", LLAMA_CACHE: "", OLLAMA_MODELS: "", HF_HOME: "", HF_HUB_CACHE: "",
  VKLLM_GPU_VRAM_MB: "", VKLLM_GPU_RESIDENT: "", VKLLM_DEVICE: "", VKLLM_GPU_CTX_MAX: "", VKLLM_GPU_MIN_CTX: "",
};
let server;
let context;
let page;

function put(rel, bytes) {
  const p = join(home, rel);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, bytes);
  return p;
}

function synth(out, arch, type, seed) {
  mkdirSync(dirname(out), { recursive: true });
  execFileSync(cli, ["synth", "-o", out, "-arch", arch, "-type", type, "-seed", String(seed)], { stdio: "pipe" });
  return readFileSync(out);
}

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  assert.ok(existsSync(cli), `CLI ${cli} is missing: run make build first`);
  // LM Studio: publisher/repo/file.gguf
  const llama = synth(join(home, ".lmstudio/models/acme/Tiny-GGUF/tiny-llama-Q8_0.gguf"), "llama", "q8_0", 1);
  // the same model where a path with ~ reaches it
  put("models/mine.gguf", llama);
  // a download cut after its header (half of a model whose weights are most of it), and one cut
  // inside its header
  put(".lmstudio/models/acme/Tiny-GGUF/tiny-partial.gguf", llama.subarray(0, Math.floor(llama.length / 2)));
  put(".lmstudio/models/acme/Broken-GGUF/broken.gguf", llama.subarray(0, 40));
  // Ollama: a manifest naming the model's blob by digest
  const qwen = synth(join(home, "qwen.tmp"), "qwen3", "q8_0", 2);
  const digest = createHash("sha256").update(qwen).digest("hex");
  put(`.ollama/models/blobs/sha256-${digest}`, qwen);
  put(".ollama/models/manifests/registry.ollama.ai/library/tinyqwen/latest", JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.docker.distribution.manifest.v2+json",
    layers: [{ mediaType: "application/vnd.ollama.image.model", digest: `sha256:${digest}`, size: qwen.length }],
  }));

  server = await startApp(dataDir, env);
  ({ context, page } = await openBrowser(profileDir, { viewport: { width: 700, height: process.env.MODELS_SHOT ? 1800 : 900 }, colorScheme: process.env.MODELS_SCHEME || "dark" }));
  await page.goto(server.url);
  await page.locator("#model-name").waitFor();
  await page.locator("#tab-model").click();
});

after(() => closeApp(context, server, dataDir, profileDir, home));

const verdictWords = /^(Fits on the GPU|Does not fit whole on the GPU|A setting of this machine|No GPU to plan for)/;

test("a model opens from a path with ~ and joins the recent list", async () => {
  await page.locator("#model-path").fill("~/models/mine.gguf");
  await page.locator("#model-open-submit").click();
  await page.locator("#model-name", { hasText: "mine.gguf" }).waitFor();
  await page.locator("#model-recent button", { hasText: "mine" }).waitFor();
  const shown = await page.locator("#model-recent .path").first().innerText();
  assert.equal(shown, join(home, "models/mine.gguf"));
  // the loaded model's plan says its verdict in words, with its bar, and no setting's name
  const verdict = await page.locator("#plan-verdict").innerText();
  assert.match(verdict, verdictWords);
  assert.doesNotMatch(verdict, /VKLLM_/);
  assert.ok(await page.locator(".plan .plan-bar .seg.weights").count(), "the loaded model's plan has no bar");
});

test("Ctrl+O in a browser, which has no file dialog, says to type the path and focuses the field", async () => {
  await page.locator("#tab-chat").click();
  await page.keyboard.press("Control+o");
  await page.locator("#model-open-status", { hasText: "no file dialog in the browser" }).waitFor();
  assert.equal(await page.evaluate(() => document.activeElement?.id), "model-path");
  assert.equal(await page.locator("#model-browse").count(), 0, "a Browse button without a dialog");
});

test("a download cut after its header does not load, and its plan shows instead", async () => {
  await page.locator("#model-path").fill("~/.lmstudio/models/acme/Tiny-GGUF/tiny-partial.gguf");
  await page.locator("#model-open-submit").click();
  await page.locator("#model-open-status", { hasText: "cut short" }).waitFor();
  const verdict = page.locator("#model-open-preview .verdict");
  await verdict.waitFor();
  assert.match(await verdict.innerText(), verdictWords);
  assert.match(await page.locator("#model-name").innerText(), /mine\.gguf/, "the model that served before still serves");
});

test("the scan lists the LM Studio and Ollama models with their verdicts before loading", async () => {
  const entry = (name) => page.locator(`.lib-entry[data-name="${name}"]`);
  for (const name of ["tiny-llama-Q8_0", "tinyqwen:latest", "tiny-partial", "broken"]) await entry(name).waitFor();
  await page.waitForFunction(() => document.querySelector("#library-progress")?.dataset.running === "false" && /Last scan/.test(document.querySelector("#library-progress").textContent));
  assert.equal(await entry("tiny-llama-Q8_0").getAttribute("data-source"), "lmstudio");
  assert.equal(await entry("tinyqwen:latest").getAttribute("data-source"), "ollama");

  for (const name of ["tiny-llama-Q8_0", "tinyqwen:latest", "tiny-partial"]) {
    const verdict = entry(name).locator(".lib-verdict:not(:has-text('Planning'))");
    await verdict.waitFor();
    const text = await verdict.innerText();
    assert.match(text, verdictWords, `${name}: ${text}`);
    assert.doesNotMatch(text, /VKLLM_/, `${name}: a setting's name in the GUI`);
    const placement = await entry(name).getAttribute("data-placement");
    assert.match(placement, /^(fits on the GPU|splits \d+ of \d+ layers|CPU)$/, `${name} placement ${placement}`);
    if (placement !== "CPU" || !/No GPU/.test(text)) assert.ok(await entry(name).locator(".plan-bar .seg.weights").count(), `${name}: no bar`);
  }
  assert.match(await entry("tiny-llama-Q8_0").locator(".lib-facts").innerText(), /llama · .* params · Q8_0 · /);
  // the cut download still plans, says it is header only and offers no Load
  await entry("tiny-partial").locator(".chip", { hasText: "header only" }).waitFor();
  assert.match(await entry("tiny-partial").locator(".lib-note").innerText(), /only its header is here/);
  assert.equal(await entry("tiny-partial").locator(".lib-load").count(), 0);
  // the file cut inside its header is listed with the reason
  assert.match(await entry("broken").locator(".lib-problem").innerText(), /^The engine cannot run it: .*ends inside its header/);
  assert.equal(await entry("broken").getAttribute("data-runnable"), "false");
  // MODELS_SHOT=../docs/screenshot-models.png keeps a picture of the library for the README
  if (process.env.MODELS_SHOT) await page.locator("#model-library").screenshot({ path: resolve(here, "..", process.env.MODELS_SHOT) });
  // a remedy where the plan offers one: the pin lets the plan use more of the card, and the
  // verdict redraws as fitting
  const pin = entry("tiny-llama-Q8_0").locator('.lib-remedy[data-remedy="pin"]');
  if (await pin.count()) {
    await pin.click();
    await entry("tiny-llama-Q8_0").locator('.lib-verdict[data-armed="true"]').waitFor();
    assert.equal(await entry("tiny-llama-Q8_0").getAttribute("data-placement"), "fits on the GPU");
  }
  // the library fits a 700 px window: no entry is wider than the page
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow} px at 700 px`);
});

test("a .gguf dropped on the page is found in the library by its name and size and planned", async () => {
  const size = readFileSync(join(home, ".lmstudio/models/acme/Tiny-GGUF/tiny-llama-Q8_0.gguf")).length;
  const drop = (name, bytes) => page.evaluate(([name, bytes]) => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(bytes)], name));
    for (const type of ["dragover", "drop"]) window.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, [name, bytes]);
  await drop("notes.txt", 10);
  await page.locator("#model-open-status", { hasText: "not a .gguf model file" }).waitFor();
  await drop("tiny-llama-Q8_0.gguf", size);
  await page.locator("#model-open-preview .verdict").waitFor();
  assert.equal(await page.locator("#model-path").inputValue(), join(home, ".lmstudio/models/acme/Tiny-GGUF/tiny-llama-Q8_0.gguf"));
  assert.equal(await page.evaluate(() => document.activeElement?.id), "model-open-submit");
  await drop("elsewhere.gguf", 123);
  await page.locator("#model-open-status", { hasText: "does not tell the app where elsewhere.gguf is" }).waitFor();
});

test("a folder added with ~ joins the scan, and removing it takes its models out", async () => {
  put("mine/extra/pick.gguf", readFileSync(join(home, "models/mine.gguf")));
  await page.locator("#library-folders summary").click();
  await page.locator("#library-folder").fill("~/mine");
  await page.locator("#library-add").click();
  const added = page.locator('.lib-entry[data-name="pick"]');
  await added.waitFor();
  assert.equal(await added.getAttribute("data-source"), "folder");
  await page.locator("#library-folders li", { hasText: join(home, "mine") }).getByRole("button", { name: "Remove" }).click();
  await added.waitFor({ state: "detached" });
});

test("a library model loads, unload empties the engine, and the embedded model comes back", async () => {
  await page.locator('.lib-entry[data-name="tinyqwen:latest"] .lib-load').click();
  await page.locator("#model-name", { hasText: "sha256-" }).waitFor();
  await page.locator(".facts dd", { hasText: "tinyqwen:latest (sha256-" }).waitFor();
  await page.locator("#model-unload").click();
  await page.locator("#model-unloaded").waitFor();
  await page.locator("#model-embedded").click();
  await page.locator("#model-name", { hasText: "stories260K" }).waitFor();
  assert.equal(await page.locator("#model-unloaded").count(), 0);
});
