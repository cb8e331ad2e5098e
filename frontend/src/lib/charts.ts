// The data of the results charts, built from history rows: pure, so the chart component draws it
// and the e2e reads it from the chart's data-points.
import type { BenchRow } from "../types";

export interface ChartSeries {
  label: string;
  scale: string; // the y scale: "pp" and "tg" get their own axes (their rates differ by 10-100×)
  values: (number | null)[];
  ids: (number | null)[]; // the history row of each value
}

export interface ChartData {
  x: number[]; // category index (bars) or seconds since the epoch (time)
  xLabels: string[]; // the categories' names; empty for time
  series: ChartSeries[];
}

export interface ChartPoint {
  series: string;
  x: number;
  y: number;
  id: number;
}

const isPP = (r: BenchRow) => r.nPrompt > 0 && r.nGen === 0;
const isTG = (r: BenchRow) => r.nGen > 0 && r.nPrompt === 0;
const usable = (r: BenchRow) => r.status === "ok" && r.avgTs > 0;

export function modelLabel(r: BenchRow): string {
  return r.quant && !r.model.toLowerCase().includes(r.quant.toLowerCase()) ? `${r.model} · ${r.quant}` : r.model;
}

// perModel is one category per model and quant with the newest pp and tg rate among rows (rows
// come newest first).
export function perModel(rows: BenchRow[]): ChartData {
  const labels: string[] = [];
  const pp: (number | null)[] = [];
  const tg: (number | null)[] = [];
  const ppIds: (number | null)[] = [];
  const tgIds: (number | null)[] = [];
  const index = new Map<string, number>();
  for (const r of rows) {
    if (!usable(r) || !(isPP(r) || isTG(r))) continue;
    const label = modelLabel(r);
    let i = index.get(label);
    if (i === undefined) {
      i = labels.length;
      index.set(label, i);
      labels.push(label);
      pp.push(null);
      tg.push(null);
      ppIds.push(null);
      tgIds.push(null);
    }
    if (isPP(r) && pp[i] === null) {
      pp[i] = r.avgTs;
      ppIds[i] = r.id;
    }
    if (isTG(r) && tg[i] === null) {
      tg[i] = r.avgTs;
      tgIds[i] = r.id;
    }
  }
  // Two slots per model, its pp bar then its tg bar, so each bar sits on its own tick.
  const slot = <T>(xs: (T | null)[], at: 0 | 1) => labels.flatMap((_, i) => (at === 0 ? [xs[i], null] : [null, xs[i]]));
  return {
    x: labels.flatMap((_, i) => [2 * i, 2 * i + 1]),
    xLabels: labels.flatMap((l) => [`${l} · pp`, "tg"]),
    series: [
      { label: "pp t/s", scale: "pp", values: slot(pp, 0), ids: slot(ppIds, 0) },
      { label: "tg t/s", scale: "tg", values: slot(tg, 1), ids: slot(tgIds, 1) },
    ],
  };
}

// overTime is one line per model and test: each ok row a point at the second it ran.
export function overTime(rows: BenchRow[]): ChartData {
  const ok = rows.filter(usable).slice().sort((a, b) => a.createdAtMs - b.createdAtMs || a.id - b.id);
  const xs: number[] = [];
  for (const r of ok) {
    const x = r.createdAtMs / 1000;
    if (xs.length === 0 || xs[xs.length - 1] !== x) xs.push(x);
  }
  const byKey = new Map<string, ChartSeries>();
  for (const r of ok) {
    const label = `${modelLabel(r)} · ${r.test}`;
    let s = byKey.get(label);
    if (!s) {
      s = { label, scale: isTG(r) ? "tg" : "pp", values: xs.map(() => null), ids: xs.map(() => null) };
      byKey.set(label, s);
    }
    const i = xs.indexOf(r.createdAtMs / 1000);
    s.values[i] = r.avgTs;
    s.ids[i] = r.id;
  }
  return { x: xs, xLabels: [], series: [...byKey.values()] };
}

// points lists every drawn value, for data-points.
export function points(d: ChartData): ChartPoint[] {
  const out: ChartPoint[] = [];
  for (const s of d.series) {
    s.values.forEach((y, i) => {
      const id = s.ids[i];
      if (y !== null && id !== null) out.push({ series: s.label, x: d.x[i], y, id });
    });
  }
  return out;
}
