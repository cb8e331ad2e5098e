// Which tab the main area shows.
export type View = "chat" | "model" | "pins" | "bench" | "results";

export const tabs: { key: View; label: string }[] = [
  { key: "chat", label: "Chat" },
  { key: "model", label: "Model & devices" },
  { key: "pins", label: "Pins" },
  { key: "bench", label: "Benchmark" },
  { key: "results", label: "Results" },
];

class ViewState {
  current = $state<View>("chat");
  // A device key the Pins tab's form starts with (the device card's "Pin…" sets it).
  pinKeyPrefill = $state("");

  show(v: View) {
    this.current = v;
  }
}

export const view = new ViewState();
