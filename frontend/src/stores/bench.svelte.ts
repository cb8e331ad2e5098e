// The Benchmark tab's state: a run in progress (driven by bench:event), and the saved history.
import { api, errText } from "../lib/api";
import { estimate, type EtaStep } from "../lib/eta";
import type { BenchEvent, BenchGroup, BenchRow, BenchSettings, ImportResult } from "../types";
import { view } from "./view.svelte";

// Presets: llama-bench's default run, and a quick one for a first look or a small machine.
export const benchPresets: Record<string, BenchSettings & { label: string }> = {
  standard: { label: "Standard · pp512 tg128 ×5", nPrompt: 512, nGen: 128, reps: 5 },
  quick: { label: "Quick · pp128 tg32 ×3", nPrompt: 128, nGen: 32, reps: 3 },
  // LocalScore's nine pp+tg shapes (engine/bench/localscore.go), scored on the Results page.
  localscore: { label: "LocalScore · 9 pp+tg shapes ×1", nPrompt: 0, nGen: 0, reps: 1, preset: "localscore" },
  custom: { label: "Custom", nPrompt: 0, nGen: 0, reps: 0 },
};

export type BenchTone = "" | "done" | "failed" | "cancelled";

class BenchState {
  running = $state(false);
  progressShown = $state(false);
  percent = $state(0);
  status = $state("");
  tone = $state<BenchTone>("");
  groups = $state<BenchGroup[]>([]);
  historyError = $state("");
  loaded = $state(false);
  justSaved = $state(new Set<number>());
  // The run in progress: when it started, its timed steps (for the ETA) and the live samples.
  startedAtMs = $state(0);
  steps = $state<EtaStep[]>([]);
  samples = $state<{ test: string; rep: number; ts: number }[]>([]);
  eta = $derived(estimate(this.startedAtMs, this.steps));

  setRunning(on: boolean) {
    if (on && !this.running) {
      this.startedAtMs = Date.now();
      this.steps = [];
      this.samples = [];
    }
    this.running = on;
    if (on) this.progressShown = true;
  }

  // progress moves the bar to fraction (a negative one keeps it where it is) and says text.
  progress(fraction: number, text: string, tone: BenchTone = "") {
    if (fraction >= 0) this.percent = Math.max(0, Math.min(100, Math.round(fraction * 100)));
    this.tone = tone;
    this.status = text;
  }

  // restore picks up a run started before this page loaded (or from another window).
  async restore() {
    try {
      if (!this.running && (await api.call<boolean>("BenchService", "Running"))) {
        this.setRunning(true);
        this.progress(0, "A run is in progress…");
      }
    } catch {
      // an older backend without Running: nothing to restore
    }
  }

  async loadHistory() {
    try {
      this.groups = await api.call<BenchGroup[]>("BenchService", "History", { gpu: "", model: "" });
      this.historyError = "";
    } catch (e) {
      this.historyError = errText(e);
    }
    this.loaded = true;
  }

  async run(settings: BenchSettings) {
    if (this.running) return;
    this.setRunning(true);
    this.progress(0, "Starting…");
    try {
      await api.call<BenchRow[]>("BenchService", "Run", settings);
    } catch (err) {
      this.progress(-1, `Failed: ${errText(err)}`, "failed");
    } finally {
      this.setRunning(false);
      await this.loadHistory();
    }
  }

  cancel() {
    this.status = "Cancelling…";
    void api.call("BenchService", "Cancel");
  }

  // import adds a llama-bench JSON or JSONL file's new rows and says how many were new and
  // how many duplicates.
  async import(path: string): Promise<ImportResult> {
    const res = await api.call<ImportResult>("BenchService", "Import", path);
    await this.loadHistory();
    return res;
  }

  onEvent(ev: BenchEvent) {
    if (ev.kind === "progress") {
      if (!this.running) this.setRunning(true);
      if (ev.phase === "done") {
        this.progress(1, "Saving…");
        return;
      }
      this.steps = [...this.steps, { test: ev.test ?? "", phase: ev.phase ?? "", step: ev.step, steps: ev.steps, reps: ev.reps, atMs: ev.atMs }];
      if (ev.phase === "rep" && ev.tokensPerSec) this.samples = [...this.samples, { test: ev.test ?? "", rep: ev.rep, ts: ev.tokensPerSec }];
      const step = ev.phase === "warmup" ? "warm-up" : `rep ${ev.rep}/${ev.reps}`;
      const rate = ev.tokensPerSec ? ` · ${ev.tokensPerSec.toFixed(1)} t/s` : "";
      this.progress(ev.steps ? ev.step / ev.steps : 0, `${ev.test} ${step}${rate} · step ${ev.step} of ${ev.steps}`);
      return;
    }
    this.justSaved = new Set((ev.rows ?? []).map((r) => r.id));
    if (ev.kind === "finished") {
      const summary = (ev.rows ?? []).map((r) => `${r.test} ${r.avgTs.toFixed(1)} t/s`).join(", ");
      this.progress(1, `Done: ${summary}`, "done");
    } else if (ev.kind === "cancelled") {
      this.progress(-1, "Cancelled: the finished tests and the cancelled one are in the history.", "cancelled");
    } else {
      this.progress(-1, `Failed: ${ev.error ?? "unknown error"}`, "failed");
    }
    this.setRunning(false);
    if (view.current === "bench") void this.loadHistory();
  }
}

export const bench = new BenchState();

api.on("bench:event", (ev: BenchEvent) => bench.onEvent(ev));
