// End-to-end: the one-click benchmark in the real app binary (browser mode, the same services the
// window binds), driven by headless Debian Chromium through playwright-core. A tiny run on the
// embedded model streams progress into the bar, lands as rows in the results table, is compared
// with the previous run, survives a reload, sits beside an imported llama-bench row, and a
// cancelled run is recorded as cancelled. The run shows live samples and an ETA, and lands on its
// GPU's (or the CPU's) Results page: a uPlot chart with a point for it, runs counted as runs, two
// rows side by side with their ratio, and an export that imports again as nothing new.
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
  // The repetitions' rates showed live as they came: 2 tests × 2 reps.
  assert.equal(await page.locator("#bench-samples").getAttribute("data-count"), "4");
  assert.match(await page.locator("#bench-samples").innerText(), /pp32 #1 \d+\.\d t\/s/);
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
  await page.locator("#bench-import-status", { hasText: "Imported 1 new row; no duplicates." }).waitFor();
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
  // The ETA from the warm-up and the finished repetitions: 100 reps of tg256 take a while.
  const eta = page.locator("#bench-eta");
  await eta.waitFor();
  assert.ok(Number(await eta.getAttribute("data-left-ms")) > 0, `ETA ${await eta.innerText()}`);
  assert.match(await eta.innerText(), /^about \d+( s| min \d\d s| h \d\d min) left$/);
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

// The page of the device the runs ran on, and the ids of our newest pp32 and tg16 rows there.
async function openResultsPage() {
  const group = page.locator(".bench-group").first();
  const key = await group.getAttribute("data-key");
  const ppId = Number(await group.locator('.bench-row[data-source="vkllm"][data-test="pp32"][data-status="ok"]').first().getAttribute("data-id"));
  await page.locator("#tab-results").click();
  await page.locator(`.results-page-tab[data-key="${key}"]`).click();
  await page.locator(`#results-title[data-key="${key}"]`).waitFor();
  return { key, ppId };
}

const pointsOf = async (chart) => JSON.parse(await page.locator(chart).getAttribute("data-points"));

test("a run lands on its device's Results page with a chart point for it, counted as runs", async () => {
  await page.locator("#tab-bench").click();
  await rowsOf("pp32").first().waitFor();
  const { ppId } = await openResultsPage();
  await page.locator("#chart-over-time canvas").first().waitFor();
  const timeline = await pointsOf("#chart-over-time");
  assert.ok(timeline.some((p) => p.id === ppId && p.y > 0 && /pp32/.test(p.series)), `no point for run ${ppId} in ${JSON.stringify(timeline)}`);
  const perModel = await pointsOf("#chart-per-model");
  assert.ok(perModel.some((p) => p.id === ppId && p.series === "pp t/s"), `per-model chart lacks the newest pp32 (${ppId}): ${JSON.stringify(perModel)}`);
  assert.ok(perModel.some((p) => p.series === "tg t/s" && p.y > 0), "per-model chart has a tg bar");
  // Two one-click runs of two tests, the import of one row, one cancelled run of one row: 4 runs, 6 rows.
  const counts = page.locator("#results-counts");
  assert.equal(await counts.getAttribute("data-runs"), "4");
  assert.equal(await counts.getAttribute("data-rows"), "6");
  assert.match(await counts.innerText(), /^4 runs · 6 rows$/);
  // A filter narrows the table and the charts.
  await page.locator("#results-filter-test").selectOption("tg16");
  await page.waitForFunction(() => document.querySelectorAll(".results-row").length === 3);
  assert.ok((await pointsOf("#chart-over-time")).every((p) => /tg16/.test(p.series)));
  await page.locator("#results-filter-clear").click();
  await page.waitForFunction(() => document.querySelectorAll(".results-row").length === 6);
  // A date filter: from tomorrow leaves nothing; up to the day before today leaves only the peer's January row.
  const day = (offset) => {
    const d = new Date(Date.now() + offset * 86_400_000);
    return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`;
  };
  await page.locator("#results-filter-from").fill(day(1));
  await page.waitForFunction(() => document.querySelectorAll(".results-row").length === 0);
  assert.deepEqual(await pointsOf("#chart-over-time"), []);
  await page.locator("#results-filter-from").fill("");
  await page.locator("#results-filter-to").fill(day(-1));
  await page.waitForFunction(() => document.querySelectorAll(".results-row").length === 1);
  assert.equal(await page.locator(".results-row").getAttribute("data-test"), "tg16");
  await page.locator("#results-filter-clear").click();
  await page.waitForFunction(() => document.querySelectorAll(".results-row").length === 6);
});

test("two rows picked side by side show their ratio", async () => {
  const tg = page.locator('.results-row[data-test="tg16"][data-status="ok"]');
  const a = tg.nth(0);
  const b = tg.nth(1);
  const rate = async (row) => Number((await row.locator("td").nth(4).innerText()).split(" ± ")[0]);
  const [ra, rb] = [await rate(a), await rate(b)];
  await a.locator(".results-pick").check();
  await b.locator(".results-pick").check();
  const cmp = page.locator("#run-compare");
  await cmp.waitFor();
  const ratio = Number(await cmp.getAttribute("data-ratio"));
  assert.ok(Math.abs(ratio - rb / ra) < 0.01 * (rb / ra), `ratio ${ratio}, want ${rb}/${ra}`);
  assert.match(await page.locator("#run-compare-ratio").innerText(), /^×\d+\.\d{3} \(/);
  // the ratio of the median repetitions, from the samples the card shows
  const samples = async (col) =>
    (await cmp.locator("tr", { hasText: "Samples" }).locator("td").nth(col).innerText()).split(", ").map(Number);
  const median = (v) => {
    const s = [...v].sort((x, y) => x - y), h = Math.floor(s.length / 2);
    return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
  };
  const [sa, sb] = [await samples(0), await samples(1)];
  assert.ok(sa.length > 0 && sb.length > 0 && sa.every(Number.isFinite) && sb.every(Number.isFinite), `samples ${sa} and ${sb}`);
  const medRatio = Number(await cmp.getAttribute("data-median-ratio"));
  const wantMed = median(sb) / median(sa);
  assert.ok(Math.abs(medRatio - wantMed) < 0.01 * wantMed, `median ratio ${medRatio}, want ${wantMed}`);
  assert.match(await page.locator("#run-compare-median-ratio").innerText(), /^×\d+\.\d{3} \(/);
});

test("an export imports again as nothing new, and says how many were duplicates", async () => {
  for (const format of ["jsonl", "csv"]) {
    const [dl] = await Promise.all([page.waitForEvent("download"), page.locator(`#results-export-${format}`).click()]);
    const file = join(dataDir, `export.${format}`);
    await dl.saveAs(file);
    await page.locator("#results-import-path").fill(file);
    await page.locator("#results-import").click();
    // The five finished rows come back as duplicates (the cancelled one is not exported).
    await page.locator("#results-status", { hasText: "Imported 0 new rows; 5 duplicates were already in the history and skipped." }).waitFor();
    assert.equal(await page.locator("#results-counts").getAttribute("data-rows"), "6");
  }
});

test("the LocalScore preset scores what fits the context and says the context the rest needs", async () => {
  await page.locator("#tab-bench").click();
  await page.locator("#bench-preset").selectOption("localscore");
  await page.locator("#bench-localscore-note").waitFor();
  assert.equal(await page.locator("#bench-p").isDisabled(), true, "the shapes replace pp and tg");
  await page.locator("#bench-run").click();
  // The embedded model loads with a 2048-token context: pp1024+tg16 runs, pp4096 does not fit.
  await page.locator(".bench-bar.failed").waitFor({ timeout: 120_000 });
  assert.match(await page.locator("#bench-status").innerText(), /pp4096\+tg256 does not fit .* a context of 4096 or more/);
  await page.locator("#tab-results").click();
  const card = page.locator("#results-localscore .localscore-score");
  await card.waitFor();
  assert.match(await page.locator("#results-localscore").innerText(), /1 of 9 shapes/);
  // The score is LocalScore's formula over the shape's two rows.
  const cell = (test, i) => page.locator(`.results-row[data-test="${test}"][data-status="ok"]`).first().locator("td").nth(i).innerText();
  const pp = Number((await cell("pp1024", 4)).split(" ± ")[0]);
  const tg = Number((await cell("tg16", 4)).split(" ± ")[0]);
  const ttft = Number((await cell("pp1024", 5)).replace(" ms", ""));
  const want = 10 * Math.cbrt((pp * tg * 1000) / ttft);
  const got = Number(await card.getAttribute("data-score"));
  assert.ok(Math.abs(got - want) < 0.02 * want, `LocalScore ${got}, want 10·cbrt(${pp}·${tg}·1000/${ttft}) = ${want}`);
  if (process.env.RESULTS_SHOT) {
    // The README's picture: the page from its device tabs down, with its LocalScore and charts.
    await page.evaluate(() => document.querySelector("#view-results h2").scrollIntoView({ block: "start" }));
    await page.screenshot({ path: process.env.RESULTS_SHOT });
  }
});
