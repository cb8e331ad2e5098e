// End-to-end: the one-click benchmark in the real app binary (browser mode, the same services the
// window binds), driven by headless Debian Chromium through playwright-core. A tiny run on the
// embedded model streams progress into the bar, lands as rows in the results table, is compared
// with the previous run, survives a reload, sits beside an imported llama-bench row, and a
// cancelled run is recorded as cancelled.
//
//   VKLLM_APP=../build/bin/vkllm-app node --test e2e/bench.test.mjs
//
// BENCH_SHOT=path keeps a screenshot of the tab after the runs (docs/screenshot-bench.png).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, existsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { appBin, openBrowser, startApp, closeApp } from "./browser-app.mjs";


const dataDir = mkdtempSync(join(tmpdir(), "vkllm-bench-e2e-data-"));
const profileDir = mkdtempSync(join(tmpdir(), "vkllm-bench-e2e-chromium-"));
let server; // { proc, url }
let context;
let page;


before(async () => {
  assert.ok(existsSync(appBin), `app binary ${appBin} is missing: run make build first`);
  server = await startApp(dataDir);
  ({ context, page } = await openBrowser(profileDir, { viewport: { width: 1180, height: 780 } }));
});

after(() => closeApp(context, server, dataDir, profileDir));

// listenBench records the bench:event payloads the page receives into window.__benchEvents.
async function listenBench() {
  await page.evaluate(
    () =>
      new Promise((open) => {
        window.__benchEvents = [];
        const src = new EventSource("api/events");
        src.addEventListener("bench:event", (e) => window.__benchEvents.push(JSON.parse(e.data)));
        src.addEventListener("open", () => open());
      }),
  );
}

async function runTiny() {
  await page.locator("#bench-p").fill("32");
  await page.locator("#bench-n").fill("16");
  await page.locator("#bench-r").fill("2");
  await page.locator("#bench-run").click();
}

const rowsOf = (test, status = "ok") => page.locator(`.bench-row[data-source="vkllm"][data-test="${test}"][data-status="${status}"]`);

test("a tiny one-click run shows progress and lands as rows in the results table", async () => {
  await page.goto(server.url);
  await page.locator("#model-name").waitFor();
  await page.locator("#tab-bench").click();
  await page.locator("#bench-empty").waitFor();
  await listenBench();
  await runTiny();
  await page.locator("#bench-progress").waitFor();
  await rowsOf("tg16").first().waitFor();
  await page.locator(".bench-bar.done").waitFor();
  const events = await page.evaluate(() => window.__benchEvents);
  const progress = events.filter((e) => e.kind === "progress");
  assert.ok(progress.length >= 6, `want a progress event per step (2 tests × (warm-up + 2 reps)), got ${progress.length}`);
  assert.ok(progress.some((e) => e.test === "pp32") && progress.some((e) => e.test === "tg16"), "progress names both tests");
  assert.equal(events.at(-1).kind, "finished");
  assert.equal(events.at(-1).rows.length, 2);
  assert.match(await page.locator("#bench-status").innerText(), /Done: pp32 .* t\/s, tg16 .* t\/s/);
  const pp = rowsOf("pp32").first();
  assert.match(await pp.locator("td").nth(2).innerText(), /^\d+\.\d\d ± \d+\.\d\d$/);
  assert.match(await pp.locator("td").nth(4).innerText(), /^\d+\.\d ms$/); // TTFT of the pp test
  assert.match(await pp.locator("td").nth(0).innerText(), /stories260K\.gguf/);
  assert.match(await pp.locator("td").nth(5).innerText(), /\S/); // placement
});

test("a second run is compared with the previous run of the same test", async () => {
  await runTiny();
  await page.locator(".bench-row.fresh").first().waitFor();
  await page.waitForFunction(() => document.querySelectorAll('.bench-row[data-test="tg16"][data-status="ok"]').length === 2);
  const newest = rowsOf("tg16").first();
  assert.match(await newest.locator(".delta").innerText(), /^[+-]?\d+\.\d%$/);
  assert.equal(await rowsOf("tg16").nth(1).locator(".delta").count(), 0, "the first run has nothing to compare with");
});

test("the runs are still there after a reload", async () => {
  await page.reload();
  await page.locator("#tab-bench").click();
  await page.waitForFunction(() => document.querySelectorAll('.bench-row[data-source="vkllm"][data-status="ok"]').length === 4);
});

test("an imported llama-bench row sits beside ours on the same GPU", async () => {
  const group = page.locator(".bench-group").first();
  const label = await group.getAttribute("data-label");
  const onCPU = label.startsWith("CPU · ");
  const peer = {
    build_commit: "abc1234",
    build_number: 1,
    cpu_info: onCPU ? label.slice("CPU · ".length) : "peer cpu",
    gpu_info: onCPU ? "" : label,
    backends: onCPU ? "CPU" : "Vulkan",
    model_filename: "/peer/models/stories260K.gguf",
    model_type: "llama 293K F32",
    model_size: 1184512,
    model_n_params: 292800,
    n_prompt: 0,
    n_gen: 16,
    avg_ns: 8000000,
    stddev_ns: 100000,
    avg_ts: 2000,
    stddev_ts: 25,
    samples_ns: [7900000, 8100000],
    samples_ts: [2025.3, 1975.3],
    test_time: "2026-01-01T00:00:00Z",
  };
  const file = join(dataDir, "peer-llama-bench.jsonl");
  writeFileSync(file, JSON.stringify(peer) + "\n");
  await page.locator("#bench-import-path").fill(file);
  await page.locator("#bench-import").click();
  await page.locator("#bench-import-status", { hasText: "Imported 1 llama-bench row" }).waitFor();
  const row = group.locator('.bench-row[data-source="llama-bench"]');
  await row.waitFor();
  assert.match(await row.innerText(), /llama-bench/);
  assert.match(await row.locator("td").nth(2).innerText(), /2000\.00 ± 25\.00/);
});

test("Cancel stops a long run and the history records it as cancelled", async () => {
  await page.locator("#bench-p").fill("0");
  await page.locator("#bench-n").fill("256");
  await page.locator("#bench-r").fill("100");
  await listenBench(); // the reload dropped the earlier listener
  await page.locator("#bench-run").click();
  await page.waitForFunction(() => window.__benchEvents.some((e) => e.kind === "progress" && e.phase === "rep"));
  await page.locator("#bench-cancel").click();
  await page.locator(".bench-bar.cancelled").waitFor();
  await rowsOf("tg256", "cancelled").first().waitFor();
  assert.equal(await page.locator("#bench-cancel").isHidden(), true);
  if (process.env.BENCH_SHOT) {
    // The README's picture: the tab after one more finished run.
    await runTiny();
    await page.locator(".bench-bar.done").waitFor();
    await page.waitForFunction(() => document.querySelectorAll('.bench-row[data-test="tg16"][data-status="ok"][data-source="vkllm"]').length === 3);
    await page.screenshot({ path: process.env.BENCH_SHOT });
  }
});
