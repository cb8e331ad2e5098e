// The loaded model as the engine reports it, kept current by engine:event.
import { api, errText } from "../lib/api";
import type { EngineEvent, ModelInfo } from "../types";
import { notice } from "./notice.svelte";

class ModelState {
  info = $state<ModelInfo | null>(null);
  error = $state(""); // why there is no model info, one sentence from the app (the engine is starting, none loaded)
  unloaded = $state(false); // the user unloaded the model: none is loaded, on purpose

  async load() {
    try {
      this.info = await api.call<ModelInfo>("ModelService", "Current");
      this.error = "";
      this.unloaded = false;
    } catch (e) {
      this.error = errText(e);
    }
  }

  // open loads another GGUF file in place of the current model; it throws the engine's refusal.
  async open(path: string) {
    this.info = await api.call<ModelInfo>("ModelService", "Open", path);
    this.error = "";
    this.unloaded = false;
  }

  // openAt opens a GGUF file at a context of ctx tokens.
  async openAt(path: string, ctx: number) {
    this.info = await api.call<ModelInfo>("ModelService", "OpenAt", path, ctx);
    this.error = "";
    this.unloaded = false;
  }

  // embedded goes back to the model built into the app.
  async embedded() {
    this.info = await api.call<ModelInfo>("ModelService", "Embedded");
    this.error = "";
    this.unloaded = false;
  }

  // unload drops the loaded model, freeing its memory; chat waits for the next one.
  async unload() {
    await api.call<void>("ModelService", "Unload");
    this.info = null;
    this.unloaded = true;
    this.error = "";
  }
}

export const model = new ModelState();

api.on("engine:event", (ev: EngineEvent) => {
  if (ev.kind === "restarted") notice.show(`Engine restarted: ${ev.reason || "unknown reason"}`);
  if (ev.kind === "stopped") notice.show(`Engine stopped: ${ev.reason || "unknown reason"}`, "error");
  if (ev.kind === "model" && ev.model) {
    model.info = ev.model;
    model.unloaded = false;
  }
  if (ev.kind === "unloaded") {
    model.info = null;
    model.unloaded = true;
    model.error = "";
  }
  if (ev.kind === "started" || ev.kind === "restarted") void model.load();
});
