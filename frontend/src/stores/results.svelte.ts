// The Results page's state: the history per GPU (and CPU), the page shown, its filters, the two
// runs picked for comparison, and export/import.
import { api, errText } from "../lib/api";
import { saveFile } from "../lib/save";
import type { BenchGroup, BenchRow, ExportFormat, ImportResult } from "../types";

export interface ResultsFilters {
  model: string;
  quant: string;
  test: string;
  backend: string;
  from: string; // yyyy-mm-dd, inclusive; "" = open
  to: string;
}

const noFilters: ResultsFilters = { model: "", quant: "", test: "", backend: "", from: "", to: "" };

const mime: Record<ExportFormat, string> = {
  csv: "text/csv",
  json: "application/json",
  jsonl: "application/x-ndjson",
  md: "text/markdown",
};

// dayMs is the start of a yyyy-mm-dd day in local time, or NaN.
function dayMs(day: string): number {
  return day ? new Date(`${day}T00:00:00`).getTime() : NaN;
}

export function applyFilters(rows: BenchRow[], f: ResultsFilters): BenchRow[] {
  const from = dayMs(f.from);
  const to = dayMs(f.to) + 86_400_000;
  return rows.filter(
    (r) =>
      (!f.model || r.model === f.model) &&
      (!f.quant || r.quant === f.quant) &&
      (!f.test || r.test === f.test) &&
      (!f.backend || r.backend === f.backend) &&
      (Number.isNaN(from) || r.createdAtMs >= from) &&
      (Number.isNaN(to) || r.createdAtMs < to),
  );
}

const distinct = (xs: string[]) => [...new Set(xs.filter(Boolean))].sort();

class ResultsState {
  groups = $state<BenchGroup[]>([]);
  loaded = $state(false);
  error = $state("");
  pageKey = $state("");
  filters = $state<ResultsFilters>({ ...noFilters });
  compare = $state<number[]>([]); // ids of up to two rows, in the order picked
  status = $state("");
  busy = $state(false);

  page = $derived<BenchGroup | undefined>(this.groups.find((g) => g.key === this.pageKey) ?? this.groups[0]);
  rows = $derived<BenchRow[]>(applyFilters(this.page?.rows ?? [], this.filters));
  runs = $derived(new Set(this.rows.map((r) => r.runKey || `row:${r.id}`)).size);
  options = $derived({
    model: distinct((this.page?.rows ?? []).map((r) => r.model)),
    quant: distinct((this.page?.rows ?? []).map((r) => r.quant)),
    test: distinct((this.page?.rows ?? []).map((r) => r.test)),
    backend: distinct((this.page?.rows ?? []).map((r) => r.backend)),
  });
  picked = $derived<BenchRow[]>(
    this.compare.map((id) => this.page?.rows.find((r) => r.id === id)).filter((r): r is BenchRow => !!r),
  );

  async load() {
    try {
      this.groups = await api.call<BenchGroup[]>("BenchService", "History", { gpu: "", model: "" });
      this.error = "";
      if (!this.groups.some((g) => g.key === this.pageKey)) this.pageKey = this.groups[0]?.key ?? "";
    } catch (e) {
      this.error = errText(e);
    }
    this.loaded = true;
  }

  show(key: string) {
    this.pageKey = key;
    this.filters = { ...noFilters };
    this.compare = [];
  }

  clearFilters() {
    this.filters = { ...noFilters };
  }

  // toggleCompare picks a row for the side-by-side view; a third pick replaces the older one.
  toggleCompare(id: number) {
    if (this.compare.includes(id)) this.compare = this.compare.filter((x) => x !== id);
    else this.compare = [...this.compare, id].slice(-2);
  }

  // export downloads the rows the page shows in one of llama-bench's forms.
  async export(format: ExportFormat) {
    const ids = this.rows.map((r) => r.id);
    if (ids.length === 0) {
      this.status = "Nothing to export: no rows match the filters; clear them to export this page.";
      return;
    }
    try {
      const text = await api.call<string>("BenchService", "Export", { format, ids });
      const slug = (this.page?.label ?? "results").toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
      saveFile(`vkllm-${slug}.${format}`, mime[format], text);
      this.status = `Exported ${ids.length} row${ids.length === 1 ? "" : "s"} as ${format.toUpperCase()}.`;
    } catch (e) {
      this.status = errText(e);
    }
  }

  async import(path: string): Promise<ImportResult | null> {
    this.busy = true;
    this.status = "Importing…";
    try {
      const res = await api.call<ImportResult>("BenchService", "Import", path);
      this.status = importText(res);
      await this.load();
      return res;
    } catch (e) {
      this.status = errText(e);
      return null;
    } finally {
      this.busy = false;
    }
  }
}

// importText says what an import did: "Imported 2 new rows; 1 duplicate was already in the history."
export function importText(res: ImportResult): string {
  const rows = (n: number) => `${n} new row${n === 1 ? "" : "s"}`;
  const dup =
    res.duplicates === 0
      ? "no duplicates"
      : `${res.duplicates} duplicate${res.duplicates === 1 ? " was" : "s were"} already in the history and skipped`;
  return `Imported ${rows(res.added)}; ${dup}.`;
}

export const results = new ResultsState();

// A finished benchmark run changes the history: read it again.
api.on("bench:event", (ev: { kind: string }) => {
  if (ev.kind !== "progress" && results.loaded) void results.load();
});
