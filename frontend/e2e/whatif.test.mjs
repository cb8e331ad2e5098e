// End-to-end: the live what-if. The real app binary in browser mode with its real sidecar and the
// embedded model: the Model tab's what-if runs the resident plan as WebAssembly in the page, on the
// plan input the sidecar gives for this machine's GPU (Mesa's lavapipe on a machine without one).
// Dragging the VRAM pin down must flip its verdict from "fits" to "does not fit", and for each
// case its plan JSON must equal the sidecar's plan for the same pin and context.
//
//   VKLLM_APP=../build/bin/vkllm-app node --test e2e/whatif.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { appBin, openBrowser, startApp, closeApp } from "./browser-app.mjs";

const dataDir = mkdtempSync(join(tmpdir(), "vkllm-e2e-whatif-data-"));
const profileDir = mkdtempSync(join(tmpdir(), "vkllm-e2e-whatif-chromium-"));
// Placement settings a developer's shell may hold are cleared, so the plan sees only the device.
const placementEnv = { VKLLM_GPU_VRAM_MB: "", VKLLM_GPU_RESIDENT: "", VKLLM_DEVICE: "", VKLLM_GPU_CTX_MAX: "", VKLLM_GPU_MIN_CTX: "" };
let server;
let context;
let page;
let hasGPU = false;

before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  server = await startApp(dataDir, placementEnv);
  ({ context, page } = await openBrowser(profileDir));
  await page.goto(server.url);
  await page.locator("#tab-model").click();
  await page.locator("#whatif-verdict, #whatif-error").first().waitFor();
  const devices = await callService("DevicesService", "List");
  hasGPU = (devices.vulkan ?? []).length > 0;
});

after(() => closeApp(context, server, dataDir, profileDir));

// callService calls a bound Go service through the browser-mode API, as the page does.
async function callService(service, method, ...args) {
  return page.evaluate(
    async ([service, method, args]) => {
      const resp = await fetch(`api/${service}/${method}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(args) });
      const body = await resp.json();
      if (body.error) throw new Error(body.error);
      return body.result;
    },
    [service, method, args],
  );
}

// setPin drags the pin slider to mb and returns the verdict's armed state once it has redrawn.
async function setPin(mb) {
  await page.locator("#whatif-pin").fill(String(mb));
  await page.waitForFunction((mb) => document.querySelector("#whatif-pin-n")?.value === String(mb), mb);
  return (await page.locator("#whatif-verdict").getAttribute("data-armed")) === "true";
}

test("the what-if starts on this machine's GPU with the engine's own plan", async (t) => {
  if ((await page.locator("#whatif-error").count()) > 0) assert.fail(`the what-if did not start: ${await page.locator("#whatif-error").textContent()}`);
  if (!hasGPU) {
    t.skip("no Vulkan device on this machine (mesa-vulkan-drivers gives lavapipe): the what-if starts on a card described by hand");
    return;
  }
  const local = await page.locator("#whatif-device").inputValue();
  assert.notEqual(local, "custom", "with a Vulkan device the what-if starts on a card this machine lacks");
  const verdict = await page.locator("#whatif-verdict").innerText();
  assert.doesNotMatch(verdict, /VKLLM_|--vram-mb/, `the verdict names a setting: ${verdict}`);
});

test("dragging the VRAM pin down flips the verdict from fits to does not fit", async (t) => {
  if (!hasGPU) return t.skip("no Vulkan device: the pin applies to a GPU of this machine");
  // From the slider's top (this GPU's heap) down to 1 MB.
  const top = Number(await page.locator("#whatif-pin").getAttribute("max"));
  const sweep = [top, ...[1024, 256, 128, 64, 16, 1].filter((mb) => mb < top)];
  const armed = [];
  const texts = [];
  for (const mb of sweep) {
    armed.push(await setPin(mb));
    texts.push(await page.locator("#whatif-verdict").innerText());
  }
  assert.equal(armed[0], true, `at a ${top} MB pin the embedded model should fit: ${texts[0]}`);
  assert.equal(armed.at(-1), false, `at a 1 MB pin nothing fits: ${texts.at(-1)}`);
  const flip = armed.indexOf(false);
  assert.ok(armed.slice(flip).every((a) => !a), `the verdict came back after declining: ${JSON.stringify(armed)}`);
  assert.match(texts[0], /^Fits on the GPU/);
  assert.match(texts.at(-1), /^Does not fit whole on the GPU/);
  for (const s of texts) assert.doesNotMatch(s, /VKLLM_|--vram-mb|env/, `the verdict names a setting: ${s}`);
  const bar = page.locator(".whatif-bar .seg.weights");
  assert.equal(await bar.count(), 1, "the stacked bar has no weights segment");
  // WHATIF_SHOT=../docs/screenshot-whatif.png keeps a picture of the what-if for the README: the
  // pin dragged just under the model's need, so the verdict and the bar say why it declines
  if (process.env.WHATIF_SHOT) {
    await setPin(sweep[flip]);
    await page.locator("#whatif").screenshot({ path: join(import.meta.dirname, "..", process.env.WHATIF_SHOT) });
  }
});

test("the WebAssembly plan equals the sidecar's plan for the same pin and context", async (t) => {
  if (!hasGPU) return t.skip("no Vulkan device: the sidecar's plan needs one");
  for (const [pin, ctx] of [
    [256, 512],
    [64, 256],
    [1, 256],
    [0, 1024],
  ]) {
    await page.locator("#whatif-ctx-n").fill(String(ctx));
    await page.locator("#whatif-pin-n").fill(String(pin));
    await page.waitForFunction(
      ([pin, ctx]) => {
        const raw = document.querySelector("#whatif-json")?.textContent;
        if (!raw) return false;
        const p = JSON.parse(raw);
        return p.pin.mb === pin && p.ctx.requested === ctx;
      },
      [pin, ctx],
    );
    const inPage = JSON.parse(await page.locator("#whatif-json").textContent());
    const sidecar = await callService("PlanService", "Plan", { model: "", ctx, ctx_strict: false, vram_mb: pin });
    assert.deepEqual(inPage, sidecar, `pin ${pin} MB, ctx ${ctx}: the page's plan differs from the sidecar's`);
  }
});

test("a card I don't have: a WDDM card keeps 27% of the cap and a tiny card declines", async () => {
  await page.locator("#whatif-pin-n").fill("0");
  await page.locator("#whatif-device").selectOption("custom");
  await page.locator("#whatif-heap").fill("16303");
  await page.locator("#whatif-wddm").check();
  await page.waitForFunction(() => JSON.parse(document.querySelector("#whatif-json")?.textContent || "{}").device?.wddm === true);
  const p = JSON.parse(await page.locator("#whatif-json").textContent());
  assert.equal(p.headroom.rule, "27% of the cap under WDDM");
  assert.equal(p.device.heap_bytes, 16303 * 1024 * 1024);
  assert.equal(await page.locator("#whatif-verdict").getAttribute("data-armed"), "true");
  await page.locator("#whatif-wddm").uncheck();
  await page.locator("#whatif-heap").fill("2100"); // 2 GiB reserve leaves 52 MB, under the scratch alone
  await page.waitForFunction(() => JSON.parse(document.querySelector("#whatif-json")?.textContent || "{}").device?.heap_bytes === 2100 * 1024 * 1024);
  assert.equal(await page.locator("#whatif-verdict").getAttribute("data-armed"), "false", await page.locator("#whatif-verdict").innerText());
});
