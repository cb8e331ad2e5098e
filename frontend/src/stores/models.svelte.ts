// The model library and the open flow: the models a scan found (LibraryService), the folders it
// covers, its progress, each model's plan for this GPU at the chosen context (PlanService), the
// recent list and the native dialog (ModelService), and a file dropped on the window.
import { api, errText } from "../lib/api";
import type { PlanJSON } from "../lib/plantypes";
import type { LibraryEvent, LibraryModel, LibraryRoot, RecentModel, ScanState } from "../types";
import { model } from "./model.svelte";
import { view } from "./view.svelte";

// A model's plan as the library shows it: planning, the plan, or why there is none.
export interface PlanEntry {
  ctx: number; // the context it was asked at (0 = the model's own)
  loading: boolean;
  plan?: PlanJSON;
  error?: string;
  noGPU?: boolean; // no Vulkan device: the model would run on the CPU
}

class ModelsState {
  library = $state<LibraryModel[]>([]);
  roots = $state<LibraryRoot[]>([]);
  scan = $state<ScanState | null>(null);
  recent = $state<RecentModel[]>([]);
  hasDialog = $state(false);
  error = $state("");
  // ctx is the context the library plans at (0 = each model's own); ctxFor holds a model's own
  // choice, set by its "lower the context" remedy.
  ctx = $state(0);
  ctxFor = $state<Record<string, number>>({});
  plans = $state<Record<string, PlanEntry>>({});
  // offered is a path the file dialog or a drop on the window chose (or why none), for the open
  // form to plan and take up.
  offered = $state<{ path: string; error: string } | null>(null);

  // events counts library:event arrivals, so an answer older than an event does not undo it.
  events = 0;

  async refresh() {
    const seen = this.events;
    try {
      const [library, roots, scan, recent, hasDialog] = await Promise.all([
        api.call<LibraryModel[]>("LibraryService", "Models"),
        api.call<LibraryRoot[]>("LibraryService", "Roots"),
        api.call<ScanState>("LibraryService", "Status"),
        api.call<RecentModel[]>("ModelService", "Recent"),
        api.call<boolean>("ModelService", "HasFileDialog"),
      ]);
      this.roots = roots;
      if (this.events === seen) {
        this.library = library;
        this.scan = scan;
      }
      this.recent = recent;
      this.hasDialog = hasDialog;
      this.error = "";
    } catch (e) {
      this.error = errText(e);
    }
  }

  // loadOpenState asks for what the open form shows: the recent list and whether there is a
  // native file dialog.
  async loadOpenState() {
    try {
      [this.recent, this.hasDialog] = await Promise.all([
        api.call<RecentModel[]>("ModelService", "Recent"),
        api.call<boolean>("ModelService", "HasFileDialog"),
      ]);
    } catch (e) {
      this.error = errText(e);
    }
  }

  async loadRecent() {
    try {
      this.recent = await api.call<RecentModel[]>("ModelService", "Recent");
    } catch (e) {
      this.error = errText(e);
    }
  }

  async startScan() {
    const seen = this.events;
    const scan = await api.call<ScanState>("LibraryService", "Scan");
    if (this.events === seen) this.scan = scan;
  }

  async addFolder(path: string) {
    await api.call<string>("LibraryService", "AddFolder", path);
    this.roots = await api.call<LibraryRoot[]>("LibraryService", "Roots");
    await this.startScan();
  }

  async removeFolder(path: string) {
    await api.call<void>("LibraryService", "RemoveFolder", path);
    this.roots = await api.call<LibraryRoot[]>("LibraryService", "Roots");
    await this.startScan();
  }

  ctxOf(path: string): number {
    return this.ctxFor[path] ?? this.ctx;
  }

  // plan asks the engine's plan for one model at its context.
  async plan(path: string) {
    const ctx = this.ctxOf(path);
    this.plans[path] = { ctx, loading: true };
    try {
      const p = await api.call<PlanJSON>("PlanService", "Plan", { model: path, ctx, ctx_strict: false, vram_mb: 0 });
      this.plans[path] = { ctx, loading: false, plan: p };
    } catch (e) {
      const error = errText(e);
      this.plans[path] = { ctx, loading: false, error, noGPU: /no Vulkan device/i.test(error) };
    }
  }

  // planAll plans every model the engine could run (or plan: a header-only file), one after
  // the other so the engine is not flooded; without force, a model already planned at its
  // context keeps its plan.
  async planAll(force = false) {
    for (const m of this.library) {
      if (m.problem && !m.headerOnly) continue;
      const had = this.plans[m.path];
      if (!force && had && !had.loading && !had.error && had.ctx === this.ctxOf(m.path)) continue;
      await this.plan(m.path);
    }
  }

  setCtx(ctx: number) {
    this.ctx = ctx;
    this.ctxFor = {};
    void this.planAll(true);
  }

  // lowerCtx is the "lower the context" remedy of one model.
  lowerCtx(path: string, ctx: number) {
    this.ctxFor[path] = ctx;
    void this.plan(path);
  }

  // pin is the "set a pin" remedy: the usable VRAM of the plan's GPU, kept for every model.
  async pin(deviceKey: string, mb: number) {
    await api.call<void>("PinService", "Set", deviceKey, mb);
    await this.planAll(true);
  }

  // browse shows the window's file dialog and offers the path chosen to the open form (nothing
  // when cancelled; in a browser, which has no dialog, it says to type the path).
  async browse() {
    view.show("model");
    try {
      const path = await api.call<string>("ModelService", "Browse");
      if (path) this.offered = { path, error: "" };
    } catch (e) {
      this.offered = { path: "", error: errText(e) };
    }
  }

  // load opens a model at the context it was planned at (the library's, or the one its remedy
  // chose; 0 = its own or its saved load options) and refreshes the recent list.
  async load(path: string) {
    const ctx = this.ctxOf(path);
    if (ctx > 0) await model.openAt(path, ctx);
    else await model.open(path);
    void this.loadRecent();
  }
}

export const models = new ModelsState();

let lastProgressAt = 0;
api.on("library:event", (ev: LibraryEvent) => {
  models.events++;
  if (ev.kind === "dropped") {
    models.offered = { path: ev.path ?? "", error: ev.error ?? "" };
    view.show("model"); // the open form takes it up
    return;
  }
  if (ev.kind === "progress" && ev.progress) {
    lastProgressAt = ev.atMs;
    models.scan = { running: true, progress: ev.progress };
    return;
  }
  if (ev.atMs < lastProgressAt) return;
  models.scan = { running: false, progress: ev.progress ?? { root: "", found: 0, read: 0, unchanged: 0, current: "" }, error: ev.error, skipped: ev.skipped, doneAtMs: ev.atMs };
  if (ev.kind === "finished") {
    void (async () => {
      try {
        models.library = await api.call<LibraryModel[]>("LibraryService", "Models");
      } catch (e) {
        models.error = errText(e);
      }
      await models.planAll(true);
    })();
  }
});

// Another model loaded (or none) changes what the GPU has free: the verdicts are asked again.
api.on("engine:event", (ev: { kind: string }) => {
  if (ev.kind === "model") void models.loadRecent();
  if ((ev.kind === "model" || ev.kind === "unloaded") && models.library.length) void models.planAll(true);
});
