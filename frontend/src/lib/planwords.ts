// The resident plan in plain words and as a bar, shared by the what-if and the model library:
// the verdict as a sentence a user reads (no setting names), the bar's segments (weights, KV
// cache, scratch, free, headroom against what is usable) and the remedies a button can apply.
import type { PlanJSON } from "./plantypes";

export const MiB = 1 << 20;
export const mb = (b: number) => Math.ceil(b / MiB);
export const mbDown = (b: number) => Math.floor(b / MiB);
const n = (x: number) => x.toLocaleString("en");

// roomWords says where the usable figure comes from, in plain words.
export function roomWords(p: PlanJSON): string {
  if (p.source === "pin") return `the ${p.pin.mb} MB pin`;
  if (p.source === "budget") return "what the driver reports free, less a safety margin";
  return `the card's ${mbDown(p.device.heap_bytes)} MB less 2 GB for the desktop and ${mb(p.headroom.bytes)} MB kept free`;
}

// verdictWords is the plan's decision as a sentence: fits resident, splits k of L layers, or
// the CPU, with the numbers that decided it.
export function verdictWords(p: PlanJSON): string {
  const usable = mbDown(p.usable_bytes);
  const ctxWords = `a context of ${n(p.ctx.chosen)} tokens`;
  if (p.verdict.armed && p.ctx.replanned)
    return `Fits on the GPU at ${ctxWords}, lowered from ${n(p.ctx.start)} so that the model, its cache and scratch fit in ${usable} MB (${roomWords(p)}).`;
  if (p.verdict.armed) return `Fits on the GPU: the whole model stays on the card at ${ctxWords}, using ${mb(p.weights.bytes + p.kv_bytes + p.scratch.bytes)} of ${usable} MB (${roomWords(p)}).`;
  const s = p.split;
  let out = p.verdict.forced_split
    ? "A setting of this machine asks for the partial offload, so the model does not stay whole on the GPU."
    : `Does not fit whole on the GPU: it needs ${mb(p.need_bytes)} MB at ${n(p.ctx.start)} tokens and ${usable} MB is usable (${roomWords(p)}).`;
  if (s && s.gpu_layers > 0) out += ` ${s.gpu_layers} of ${s.layers} layers would run on the GPU and the rest on the CPU.`;
  else out += " It would run on the CPU.";
  if (!p.verdict.forced_split && p.ctx.fit >= 256) out += ` It would fit whole at a context of ${n(p.ctx.fit)} tokens.`;
  return out;
}

// placementWords is the verdict in three words for a list: resident, split k of L, or CPU.
export function placementWords(p: PlanJSON): string {
  if (p.verdict.armed) return "fits on the GPU";
  if (p.split && p.split.gpu_layers > 0) return `splits ${p.split.gpu_layers} of ${p.split.layers} layers`;
  return "CPU";
}

export interface Segment {
  name: string;
  cls: string;
  bytes: number;
}

export interface Bar {
  segs: Segment[];
  scale: number;
  usableAt: number; // percent of the bar's width where the usable memory ends
  over: boolean;
}

// barOf is the stacked bar of a plan: what the model takes against what is usable.
export function barOf(p: PlanJSON): Bar {
  const used = p.weights.bytes + p.kv_bytes + p.scratch.bytes;
  const reserve = Math.max(0, p.cap_bytes - p.usable_bytes);
  const segs: Segment[] = [
    { name: "weights", cls: "weights", bytes: p.weights.bytes },
    { name: "KV cache", cls: "kv", bytes: p.kv_bytes },
    { name: "scratch", cls: "scratch", bytes: p.scratch.bytes },
    { name: "free", cls: "free", bytes: Math.max(0, p.usable_bytes - used) },
    { name: p.source === "budget" ? "not reported free" : "headroom", cls: "headroom", bytes: reserve },
  ];
  const scale = Math.max(used, p.usable_bytes + reserve, 1);
  return { segs, scale, usableAt: (p.usable_bytes / scale) * 100, over: used > p.usable_bytes };
}

export type Remedy = { kind: "context"; ctx: number; label: string } | { kind: "pin"; mb: number; deviceKey: string; label: string };

// remedies are what a button can change so that a declined model fits whole: a lower context
// (the one the plan says it would fit at), or a pin that lets the plan use more of a card whose
// driver reports no free memory (the plan then keeps no headroom of its own).
export function remedies(p: PlanJSON): Remedy[] {
  if (p.verdict.armed || p.verdict.forced_split) return [];
  const out: Remedy[] = [];
  if (p.ctx.fit >= 256 && p.ctx.fit < p.ctx.start) out.push({ kind: "context", ctx: p.ctx.fit, label: `Lower the context to ${n(p.ctx.fit)}` });
  const heap = mbDown(p.device.heap_bytes);
  const want = Math.ceil((mb(p.need_bytes) + 256) / 256) * 256; // what it needs and a little slack
  if (p.source === "heap" && !p.device.assumed && p.device.key && heap > 0 && want <= heap - 512)
    out.push({ kind: "pin", mb: want, deviceKey: p.device.key, label: `Let it use ${n(want)} MB of this GPU (a pin)` });
  return out;
}
