// The loaded model's load options (app.LoadOptionsService): context length, device or CPU, KV
// cache type, with the bounds the panel shows. Applying reloads the model in the engine; the
// header follows through engine:event.
import { api, errText } from "../lib/api";
import type { EngineEvent, ModelInfo } from "../types";

// app.LoadOptions: context 0 = the model's own; device "auto" | "gpu:N" | "cpu"; kv "f16" | "f32".
export interface LoadOptions {
  context: number;
  device: string;
  kv: string;
}

export interface DeviceChoice {
  value: string;
  label: string;
}

// engine.KVType
export interface KVType {
  name: string;
  cpu_only: boolean;
}

// app.LoadState
export interface LoadState {
  model: ModelInfo;
  options: LoadOptions;
  saved: boolean;
  trainedContext: number;
  planContext: number; // 0 = the plan does not fit it on the GPU, or the CPU is chosen
  planDevice: string;
  planVerdict: string;
  devices: DeviceChoice[];
  kvTypes: KVType[];
}

class LoadOptionsState {
  current = $state<LoadState | null>(null);
  error = $state(""); // why the options could not be read
  reloading = $state(false);

  async load() {
    try {
      this.current = await api.call<LoadState>("LoadOptionsService", "Current");
      this.error = "";
    } catch (e) {
      this.error = errText(e);
    }
  }

  // preview gives the bounds for another device before it is applied.
  async preview(device: string): Promise<LoadState | null> {
    try {
      return await api.call<LoadState>("LoadOptionsService", "Preview", device);
    } catch {
      return null;
    }
  }

  // apply reloads the model with o; it throws the reason a reload was refused or failed.
  async apply(o: LoadOptions) {
    this.reloading = true;
    try {
      this.current = await api.call<LoadState>("LoadOptionsService", "Apply", o);
    } finally {
      this.reloading = false;
    }
  }
}

export const loadOptions = new LoadOptionsState();

api.on("engine:event", (ev: EngineEvent) => {
  if (ev.kind === "model" || ev.kind === "started" || ev.kind === "restarted") {
    if (!loadOptions.reloading) void loadOptions.load();
  }
});
