// The loaded model as the engine reports it, kept current by engine:event.
import { api, errText } from "../lib/api";
import type { EngineEvent, ModelInfo } from "../types";
import { notice } from "./notice.svelte";

class ModelState {
  info = $state<ModelInfo | null>(null);
  error = $state(""); // why there is no model info (the engine is not ready)

  async load() {
    try {
      this.info = await api.call<ModelInfo>("ModelService", "Current");
      this.error = "";
    } catch (e) {
      this.error = errText(e);
    }
  }

  // open loads another GGUF file in place of the current model; it throws the engine's refusal.
  async open(path: string) {
    this.info = await api.call<ModelInfo>("ModelService", "Open", path);
    this.error = "";
  }
}

export const model = new ModelState();

api.on("engine:event", (ev: EngineEvent) => {
  if (ev.kind === "restarted") notice.show(`Engine restarted: ${ev.reason || "unknown reason"}`);
  if (ev.kind === "stopped") notice.show(`Engine stopped: ${ev.reason || "unknown reason"}`, "error");
  if (ev.kind === "model" && ev.model) model.info = ev.model;
  if (ev.kind === "started" || ev.kind === "restarted") void model.load();
});
