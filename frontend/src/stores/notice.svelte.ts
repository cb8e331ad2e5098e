// The one dismissable notice line under the header (engine restarts, failed calls).
export type NoticeTone = "warn" | "error" | "info";

class NoticeState {
  text = $state("");
  tone = $state<NoticeTone>("warn");
  shown = $state(false);

  show(text: string, tone: NoticeTone = "warn") {
    this.text = text;
    this.tone = tone;
    this.shown = true;
  }

  dismiss() {
    this.shown = false;
  }
}

export const notice = new NoticeState();
