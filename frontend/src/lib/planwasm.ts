/// <reference types="vite/client" />
// The resident plan in the page: cmd/planwasm (engine/plan built for WebAssembly) with Go's
// wasm_exec.js, both put into src/assets/planwasm/ by the Makefile's planwasm step before the Vite
// build. The globs find them when they are there and leave the what-if saying how to build them
// when they are not (a plain `npm run build` without make).
import type { PlanInput } from "./plantypes";

interface GoRuntime {
  importObject: WebAssembly.Imports;
  run(instance: WebAssembly.Instance): Promise<void>;
}

declare global {
  // eslint-disable-next-line no-var
  var Go: (new () => GoRuntime) | undefined;
  // eslint-disable-next-line no-var
  var vkllmPlan: ((inputJSON: string) => string) | undefined;
}

const wasmURLs = import.meta.glob("../assets/planwasm/plan.wasm", { query: "?url", import: "default", eager: true }) as Record<string, string>;
// Imported for its effect: it defines globalThis.Go.
import.meta.glob("../assets/planwasm/wasm_exec.js", { eager: true });

let loading: Promise<void> | null = null;

// loadPlan fetches and starts the module once; it rejects with what to do when it was not built.
export function loadPlan(): Promise<void> {
  loading ??= (async () => {
    const url = Object.values(wasmURLs)[0];
    if (!url || !globalThis.Go) throw new Error("the what-if's WebAssembly plan was not built into this UI (make frontend builds it)");
    const resp = await fetch(url);
    if (!resp.ok) throw new Error(`fetch the WebAssembly plan: ${resp.status} ${resp.statusText}`);
    const go = new globalThis.Go();
    const { instance } = await WebAssembly.instantiate(await resp.arrayBuffer(), go.importObject);
    void go.run(instance);
    if (!globalThis.vkllmPlan) throw new Error("the WebAssembly plan started but defined no vkllmPlan");
  })();
  loading.catch(() => (loading = null));
  return loading;
}

// planJSON is the plan's JSON for an input, byte for byte what the sidecar's plan route answers
// for the same input; it throws the module's reason for a bad input.
export function planJSON(input: PlanInput): string {
  if (!globalThis.vkllmPlan) throw new Error("the WebAssembly plan is not loaded yet");
  const out = globalThis.vkllmPlan(JSON.stringify(input));
  if (out.startsWith('{"error"')) throw new Error((JSON.parse(out) as { error: string }).error);
  return out;
}
