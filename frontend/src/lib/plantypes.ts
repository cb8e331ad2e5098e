// The JSON shapes of engine/plan: plan.Input (the sidecar's POST /vkllm/plan/input, what the
// WebAssembly plan reads) and plan.Plan (what it and POST /vkllm/plan answer). Only the fields the
// UI reads or changes are spelled out; the rest travel untouched.

export interface PlanDevice {
  index: number;
  name: string;
  key?: string;
  heap_bytes: number;
  budget_reported: boolean;
  budget_bytes: number;
  usage_bytes: number;
  max_storage_buffer_range: number;
  wddm: boolean;
  assumed: boolean;
}

export interface PlanPin {
  mb: number;
  source?: string; // flag | env | store
  stored_mb?: number;
}

export interface PlanInput {
  model: { name: string; layers: number; ctx_length: number; experts?: number; [k: string]: unknown };
  uploads: unknown[];
  kv: { per_pos_bytes: number; [k: string]: unknown };
  scratch: { bytes: number; [k: string]: unknown };
  device: PlanDevice;
  pin: PlanPin;
  ctx: { requested: number; max: number; min: number; strict: boolean };
  force_split: boolean;
}

export interface PlanJSON {
  model: { name: string; layers: number };
  device: PlanDevice;
  weights: { bytes: number };
  kv_bytes: number;
  scratch: { bytes: number };
  headroom: { bytes: number; rule: string };
  budget_margin_bytes: number;
  source: "heap" | "budget" | "pin";
  pin: PlanPin;
  cap_bytes: number;
  usable_bytes: number;
  need_bytes: number;
  ctx: { start: number; fit: number; replanned: boolean; chosen: number; floor: number; bound_by?: string };
  verdict: { armed: boolean; forced_split: boolean; text: string };
  split?: { gpu_layers: number; layers: number; output_on_gpu: boolean; gpu_bytes: number };
}
