import "./style.css";
import { guardLinks, renderMarkdown } from "./markdown";
import { connect } from "./transport";
import type {
  BenchEvent,
  BenchGroup,
  BenchRow,
  BenchSettings,
  ChatDelta,
  ChatEvent,
  ContextPolicy,
  ContextUse,
  Conversation,
  EngineEvent,
  Message,
  ModelInfo,
  Pin,
} from "./types";

const api = connect();

// h builds an element; text goes in as text nodes, never as HTML.
function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  for (const c of children) if (c != null) el.append(c);
  return el;
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

// ---- state -------------------------------------------------------------------------------------

const state = {
  conversations: [] as Conversation[],
  current: 0, // conversation id shown; 0 = a new chat not yet saved
  messages: [] as Message[],
  sending: false,
  sendingConv: 0, // the conversation whose reply is generating (Stop targets it)
  awaitingNew: false, // a first message was sent from a new chat; its conversation is being made
  newChatPolicy: "rolling" as ContextPolicy, // the policy picked before a new chat is saved
  model: null as ModelInfo | null,
  view: "chat" as "chat" | "model" | "pins" | "bench",
};

// ---- layout ------------------------------------------------------------------------------------

const convList = h("nav", { class: "conv-list", id: "conversations" });
const newChat = h("button", { class: "new-chat", id: "new-chat", type: "button" }, "+ New chat");
const sidebar = h(
  "aside",
  { class: "sidebar" },
  h("div", { class: "brand" }, h("span", { class: "logo" }, "vk"), h("span", {}, "vkllm")),
  newChat,
  convList,
  h("div", { class: "sidebar-foot", id: "mode" }, api.mode === "wails" ? "desktop" : "browser mode"),
);

const modelBadge = h("div", { class: "model-badge", id: "model-badge" }, "loading model…");
const tabs = h("div", { class: "tabs", role: "tablist" });
// On the CPU the header's second row says why, in one sentence from the engine.
const cpuReason = h("p", { class: "cpu-reason", id: "cpu-reason", hidden: "" });
const header = h("header", { class: "topbar" }, modelBadge, tabs, cpuReason);
const notice = h("div", { class: "notice", id: "notice", hidden: "" });

const messagesEl = h("div", { class: "messages", id: "messages" });
guardLinks(messagesEl);
const input = h("textarea", { id: "composer-input", rows: "1", placeholder: "Write a message… (Enter to send, Shift+Enter for a new line)" });
const sendBtn = h("button", { id: "send", class: "primary", type: "submit" }, "Send");
const stopBtn = h("button", { id: "stop", class: "ghost", type: "button", hidden: "" }, "Stop");
const composer = h("form", { class: "composer", id: "composer" }, input, stopBtn, sendBtn);
// Above the composer (which stays at the window's bottom edge): the context the last reply took,
// and what happens when it is full.
const contextUse = h("span", { id: "context-use" });
const policySelect = h(
  "select",
  { id: "context-policy", "aria-label": "When the context is full", title: "When the conversation outgrows the model's context" },
  h("option", { value: "rolling" }, "When full: drop the oldest turns"),
  h("option", { value: "truncate-middle" }, "When full: keep the first turn, drop the middle"),
  h("option", { value: "stop" }, "When full: stop"),
);
const contextBar = h("div", { class: "context-bar" }, contextUse, policySelect);
const chatView = h("section", { class: "view chat-view", id: "view-chat" }, messagesEl, contextBar, composer);

const modelView = h("section", { class: "view panel", id: "view-model", hidden: "" });
const pinsView = h("section", { class: "view panel", id: "view-pins", hidden: "" });
const benchView = h("section", { class: "view panel wide", id: "view-bench", hidden: "" });

const main = h("main", { class: "main" }, header, notice, chatView, modelView, pinsView, benchView);
document.getElementById("app")!.append(h("div", { class: "shell" }, sidebar, main));

const views = { chat: chatView, model: modelView, pins: pinsView, bench: benchView };
const tabNames: [keyof typeof views, string][] = [
  ["chat", "Chat"],
  ["model", "Model & devices"],
  ["pins", "Pins"],
  ["bench", "Benchmark"],
];
for (const [key, label] of tabNames) {
  const b = h("button", { type: "button", role: "tab", id: `tab-${key}`, "data-view": key }, label);
  b.addEventListener("click", () => show(key));
  tabs.append(b);
}

function show(view: typeof state.view) {
  state.view = view;
  for (const [key, el] of Object.entries(views)) el.hidden = key !== view;
  for (const b of tabs.querySelectorAll("button")) b.classList.toggle("active", b.dataset.view === view);
  if (view === "model") void renderModelView();
  if (view === "pins") void renderPins();
  if (view === "bench") void openBench();
}

// ---- notices -----------------------------------------------------------------------------------

function showNotice(text: string, tone: "warn" | "error" | "info" = "warn") {
  notice.replaceChildren(h("span", {}, text), closeButton());
  notice.className = `notice ${tone}`;
  notice.hidden = false;
}

function closeButton() {
  const b = h("button", { type: "button", class: "close", "aria-label": "dismiss" }, "×");
  b.addEventListener("click", () => (notice.hidden = true));
  return b;
}

// ---- model header ------------------------------------------------------------------------------

function formatParams(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)}B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(0)}K`;
  return String(n);
}

function formatBytes(n: number): string {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(2)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(0)} KiB`;
  return `${n} B`;
}

function renderModelBadge() {
  const m = state.model;
  if (!m) return;
  const placement = m.placement || m.backend || "";
  const parts: Node[] = [
    h("span", { class: "dot" }),
    h("strong", { id: "model-name" }, m.name || "model"),
    h("span", { class: "chip", id: "model-placement" }, placement),
  ];
  if (m.backend && m.backend !== placement) parts.push(h("span", { class: "chip" }, m.backend));
  if (m.params) parts.push(h("span", { class: "muted" }, `${formatParams(m.params)} params`));
  modelBadge.replaceChildren(...parts);
  cpuReason.textContent = m.cpu_reason ?? "";
  cpuReason.hidden = !m.cpu_reason;
}

async function loadModel() {
  try {
    state.model = await api.call<ModelInfo>("ModelService", "Current");
    renderModelBadge();
  } catch (e) {
    modelBadge.replaceChildren(h("span", { class: "dot off" }), h("span", {}, `engine not ready: ${errText(e)}`));
    cpuReason.hidden = true;
  }
}

// ---- conversations -----------------------------------------------------------------------------

async function loadConversations() {
  try {
    state.conversations = await api.call<Conversation[]>("ChatService", "ListConversations");
  } catch (e) {
    showNotice(`Could not list conversations: ${errText(e)}`, "error");
  }
  renderConversations();
  showPolicy();
}

function renderConversations() {
  convList.replaceChildren(
    ...state.conversations.map((c) => {
      const del = h("button", { type: "button", class: "conv-del", title: "Delete conversation", "aria-label": "delete" }, "×");
      del.addEventListener("click", (ev) => {
        ev.stopPropagation();
        void deleteConversation(c.id);
      });
      const item = h(
        "div",
        { class: "conv" + (c.id === state.current ? " active" : ""), "data-id": String(c.id), role: "button", tabindex: "0" },
        h("span", { class: "conv-title" }, c.title),
        del,
      );
      item.addEventListener("click", () => void openConversation(c.id));
      return item;
    }),
  );
}

function showContextUse(u: ContextUse | null) {
  if (!u) {
    contextUse.textContent = "";
    return;
  }
  let text = `${u.used} / ${u.context} tokens of context`;
  if (u.dropped > 0) text += ` · ${u.dropped} earlier message${u.dropped === 1 ? "" : "s"} left out`;
  contextUse.textContent = text;
}

function showPolicy() {
  const c = state.conversations.find((x) => x.id === state.current);
  policySelect.value = c ? c.contextPolicy || "rolling" : state.newChatPolicy;
}

async function setPolicy(conversationId: number, policy: ContextPolicy) {
  try {
    const c = await api.call<Conversation>("ChatService", "SetContextPolicy", conversationId, policy);
    const i = state.conversations.findIndex((x) => x.id === c.id);
    if (i >= 0) state.conversations[i] = c;
  } catch (e) {
    showNotice(`Could not change what happens when the context is full: ${errText(e)}`, "error");
    showPolicy();
  }
}

policySelect.addEventListener("change", () => {
  const policy = policySelect.value as ContextPolicy;
  if (state.current === 0) state.newChatPolicy = policy;
  else void setPolicy(state.current, policy);
});

async function openConversation(id: number) {
  state.current = id;
  show("chat");
  renderConversations();
  showContextUse(null);
  showPolicy();
  try {
    state.messages = id ? await api.call<Message[]>("ChatService", "Messages", id) : [];
  } catch (e) {
    showNotice(`Could not load the conversation: ${errText(e)}`, "error");
    state.messages = [];
  }
  renderMessages();
}

async function deleteConversation(id: number) {
  try {
    await api.call("ChatService", "DeleteConversation", id);
  } catch (e) {
    showNotice(`Could not delete the conversation: ${errText(e)}`, "error");
  }
  if (state.current === id) await openConversation(0);
  await loadConversations();
}

// ---- messages ----------------------------------------------------------------------------------

function messageMeta(m: Message): HTMLElement | null {
  if (m.role !== "assistant") return null;
  const parts: string[] = [];
  if (m.state === "streaming") parts.push("generating…");
  if (m.state !== "streaming" && m.tokensPerSec > 0) parts.push(`${m.tokensPerSec.toFixed(1)} tok/s`);
  if (m.state !== "streaming" && m.ttftMs >= 0 && m.content) parts.push(`TTFT ${m.ttftMs} ms`);
  if (m.model) parts.push(m.model);
  const meta = h("div", { class: "meta" }, parts.join(" · "));
  if (m.state === "interrupted") meta.prepend(h("span", { class: "badge warn" }, "interrupted"), " ");
  if (m.state === "error") meta.prepend(h("span", { class: "badge error" }, "error"), " ");
  return meta;
}

// messageBubble shows a user message as plain text and an assistant reply as sanitized markdown.
function messageBubble(m: Message): HTMLElement {
  if (m.role !== "assistant" || !m.content) return h("div", { class: "bubble" }, m.content || (m.state === "streaming" ? "" : "(no text)"));
  const el = h("div", { class: "bubble md" });
  renderMarkdown(el, m.content);
  return el;
}

function messageNode(m: Message): HTMLElement {
  return h("div", { class: `msg ${m.role}`, "data-id": String(m.id), "data-state": m.state }, messageBubble(m), messageMeta(m));
}

// atBottom says whether the message list is scrolled to (near) its end, so an update follows the
// reply only when the reader has not scrolled up.
function atBottom(): boolean {
  return messagesEl.scrollHeight - messagesEl.scrollTop - messagesEl.clientHeight < 40;
}

function renderMessages() {
  if (state.messages.length === 0) {
    messagesEl.replaceChildren(
      h(
        "div",
        { class: "empty" },
        h("h1", {}, "What should the model write?"),
        h("p", { class: "muted" }, "Replies stream from the local engine. The default model writes short children's stories — try “Once upon a time”."),
      ),
    );
    return;
  }
  messagesEl.replaceChildren(...state.messages.map(messageNode));
  messagesEl.scrollTop = messagesEl.scrollHeight;
}

function replaceMessage(m: Message) {
  const i = state.messages.findIndex((x) => x.id === m.id);
  if (i >= 0) state.messages[i] = m;
  else state.messages.push(m);
  const follow = atBottom();
  const old = messagesEl.querySelector(`.msg[data-id="${m.id}"]`);
  if (old) old.replaceWith(messageNode(m));
  else renderMessages();
  if (follow) messagesEl.scrollTop = messagesEl.scrollHeight;
}

api.on("chat:event", (ev: ChatEvent) => {
  if (ev.kind === "started") {
    if (state.sending && state.sendingConv === 0) state.sendingConv = ev.conversationId;
    if (state.awaitingNew && ev.conversation) {
      state.awaitingNew = false;
      state.current = ev.conversationId;
      const policy = state.newChatPolicy;
      void (policy !== ev.conversation.contextPolicy ? setPolicy(ev.conversationId, policy) : Promise.resolve()).then(loadConversations);
    }
    if (ev.conversationId !== state.current) return;
    if (ev.user) state.messages.push(ev.user);
    state.messages.push(ev.assistant);
    renderMessages();
  } else if (ev.kind === "finished") {
    if (ev.conversationId !== state.current) return;
    replaceMessage(ev.assistant);
    if (ev.context) showContextUse(ev.context);
  }
});

api.on("chat:delta", (d: ChatDelta) => {
  if (d.conversationId !== state.current) return;
  const m = state.messages.find((x) => x.id === d.messageId);
  if (!m) return;
  m.content += d.text;
  const follow = atBottom();
  const bubble = messagesEl.querySelector<HTMLElement>(`.msg[data-id="${d.messageId}"] .bubble`);
  if (bubble) {
    bubble.classList.add("md");
    renderMarkdown(bubble, m.content);
  }
  if (follow) messagesEl.scrollTop = messagesEl.scrollHeight;
});

api.on("engine:event", (ev: EngineEvent) => {
  if (ev.kind === "restarted") showNotice(`Engine restarted: ${ev.reason || "unknown reason"}`);
  if (ev.kind === "stopped") showNotice(`Engine stopped: ${ev.reason || "unknown reason"}`, "error");
  if (ev.kind === "model" && ev.model) {
    state.model = ev.model;
    renderModelBadge();
  }
  if (ev.kind === "started" || ev.kind === "restarted") void loadModel();
});

function setSending(on: boolean) {
  state.sending = on;
  sendBtn.disabled = on;
  stopBtn.hidden = !on;
}

async function send() {
  const text = input.value.trim();
  if (!text || state.sending) return;
  input.value = "";
  autosize();
  setSending(true);
  state.sendingConv = state.current;
  state.awaitingNew = state.current === 0;
  try {
    const reply = await api.call<Message>("ChatService", "Send", state.current, text);
    if (state.current === 0) await openConversation(reply.conversationId); // the started event was missed
    else if (reply.conversationId === state.current) replaceMessage(reply);
  } catch (e) {
    showNotice(`The reply failed: ${errText(e)}`, "error");
  } finally {
    state.awaitingNew = false;
    setSending(false);
    await loadConversations();
    input.focus();
  }
}

function autosize() {
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 200)}px`;
}

composer.addEventListener("submit", (e) => {
  e.preventDefault();
  void send();
});
input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    void send();
  }
});
input.addEventListener("input", autosize);
stopBtn.addEventListener("click", () => void api.call("ChatService", "Stop", state.sendingConv));
newChat.addEventListener("click", () => {
  void openConversation(0);
  input.focus();
});

// ---- model & devices ---------------------------------------------------------------------------

function row(label: string, value: string | number | null | undefined) {
  return [h("dt", {}, label), h("dd", {}, value === undefined || value === null || value === "" ? "—" : String(value))];
}

async function renderModelView() {
  const pathInput = h("input", { id: "model-path", type: "text", placeholder: "/path/to/model.gguf", spellcheck: "false" });
  const openBtn = h("button", { type: "submit", class: "primary" }, "Open");
  const form = h("form", { class: "inline-form" }, pathInput, openBtn);
  const status = h("p", { class: "muted" });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    openBtn.disabled = true;
    status.textContent = "Loading…";
    try {
      state.model = await api.call<ModelInfo>("ModelService", "Open", pathInput.value);
      renderModelBadge();
      status.textContent = "";
      void renderModelView();
    } catch (err) {
      status.textContent = errText(err);
    } finally {
      openBtn.disabled = false;
    }
  });

  const m = state.model;
  const facts = h("dl", { class: "facts" });
  if (m) {
    facts.append(
      ...row("Name", m.name),
      ...row("File", m.path || "embedded default model"),
      ...row("Architecture", m.arch),
      ...row("Parameters", m.params ? formatParams(m.params) : ""),
      ...row("Size", m.file_size ? formatBytes(m.file_size) : ""),
      ...row("Quantization", m.quant),
      ...row("Layers × dim", m.layers ? `${m.layers} × ${m.dim}` : ""),
      ...row("Context", m.context ? `${m.context} of ${m.context_length}` : m.context_length),
      ...row("Backend", m.backend),
      ...row("Placement", m.placement),
      ...(m.cpu_reason ? row("Why the CPU", m.cpu_reason) : []),
      ...row("Chat template", m.has_chat_template ? "from the model" : "generic fallback"),
    );
  }
  const devices = h("div", { class: "devices" }, h("p", { class: "muted" }, "Asking the engine for devices…"));
  const plan = h("div", { class: "plan" });
  modelView.replaceChildren(
    h("h2", {}, "Model"),
    facts,
    h("h3", {}, "Open another GGUF file"),
    form,
    status,
    h("h2", {}, "Resident plan"),
    plan,
    h("h2", {}, "Devices"),
    devices,
  );
  void renderPlan(plan);
  try {
    const raw = await api.call<unknown>("DevicesService", "List");
    devices.replaceChildren(...renderDevices(raw));
  } catch (e) {
    devices.replaceChildren(h("p", { class: "muted" }, `No device report: ${errText(e)}`));
  }
}

interface DeviceInfo {
  index: number;
  name: string;
  vendor_id: number;
  device_id: number;
  uuid: string;
  type: string;
  driver_name: string;
  driver_info: string;
  api_version: string;
  heaps: { size: number; device_local: boolean; budget: number; usage: number }[] | null;
  budget_reported: boolean;
}

interface DevicesReport {
  vulkan: DeviceInfo[] | null;
  vulkan_error?: string;
  default?: number;
  cpu: { model: string; cores: number };
}

const hex4 = (n: number) => n.toString(16).padStart(4, "0");

// deviceKey is the stable per-GPU key pins are stored under (engine/vulkan DeviceInfo.Key).
function deviceKey(d: DeviceInfo): string {
  return `${hex4(d.vendor_id)}:${hex4(d.device_id)}:${d.uuid}`;
}

// renderDevices shows the engine's device report (GET /vkllm/devices): each Vulkan device with
// its driver and heaps, the CPU, and the whole document for the curious.
function renderDevices(raw: unknown): Node[] {
  const r = raw as DevicesReport;
  const cards: Node[] = [];
  for (const d of r?.vulkan ?? []) {
    const heaps = (d.heaps ?? [])
      .map((hp) => {
        let s = `${formatBytes(hp.size)}${hp.device_local ? " device-local" : ""}`;
        if (d.budget_reported && hp.budget) s += ` (budget ${formatBytes(hp.budget)}, used ${formatBytes(hp.usage)})`;
        return s;
      })
      .join(", ");
    const pin = h("button", { type: "button", class: "ghost small" }, "Pin…");
    pin.addEventListener("click", () => {
      pinKeyPrefill = deviceKey(d);
      show("pins");
    });
    cards.push(
      h(
        "div",
        { class: "card device", "data-key": deviceKey(d) },
        h("div", { class: "card-head" }, h("strong", {}, `${d.index}: ${d.name}`), r.default === d.index ? h("span", { class: "chip" }, "default") : h("span", {}), pin),
        h("div", { class: "muted" }, [d.type, d.driver_name, d.driver_info, d.api_version && `Vulkan ${d.api_version}`].filter(Boolean).join(" · ")),
        heaps ? h("div", { class: "muted" }, `heaps: ${heaps}${d.budget_reported ? "" : " · memory budget not reported"}`) : null,
        h("code", {}, deviceKey(d)),
      ),
    );
  }
  if (r?.vulkan_error) cards.push(h("p", { class: "muted" }, `Vulkan: ${r.vulkan_error}`));
  if (r?.cpu) cards.push(h("div", { class: "card" }, h("strong", {}, `CPU: ${r.cpu.model || "unknown"}`), h("div", { class: "muted" }, `${r.cpu.cores} cores`)));
  if (cards.length === 0) cards.push(h("p", { class: "muted" }, "The engine reported no devices."));
  const details = h("details", {}, h("summary", {}, "Full report"), h("pre", {}, JSON.stringify(raw, null, 2)));
  return [...cards, details];
}

// renderPlan asks the engine where the loaded model goes and shows the verdict line.
async function renderPlan(into: HTMLElement) {
  into.replaceChildren(h("p", { class: "muted" }, "Planning…"));
  try {
    const p = await api.call<{ verdict?: { armed: boolean; text: string }; split?: { gpu_layers: number; layers: number } }>(
      "PlanService",
      "Plan",
      { model: "", ctx: 0, ctx_strict: false, vram_mb: 0 },
    );
    const lines: Node[] = [];
    if (p?.verdict) lines.push(h("p", { class: p.verdict.armed ? "verdict ok" : "verdict warn", id: "plan-verdict" }, p.verdict.text));
    if (p?.split) lines.push(h("p", { class: "muted" }, `split: ${p.split.gpu_layers} of ${p.split.layers} layers on GPU`));
    lines.push(h("details", {}, h("summary", {}, "Full plan"), h("pre", {}, JSON.stringify(p, null, 2))));
    into.replaceChildren(...lines);
  } catch (e) {
    into.replaceChildren(h("p", { class: "muted" }, `No plan: ${errText(e)}`));
  }
}

// ---- pins --------------------------------------------------------------------------------------

let pinKeyPrefill = "";

async function renderPins() {
  const keyInput = h("input", { id: "pin-key", type: "text", placeholder: "device key (vvvv:dddd:uuid)", spellcheck: "false" });
  keyInput.value = pinKeyPrefill;
  pinKeyPrefill = "";
  const mbInput = h("input", { id: "pin-mb", type: "number", min: "1", placeholder: "MiB" });
  const setBtn = h("button", { type: "submit", class: "primary" }, "Pin");
  const form = h("form", { class: "inline-form" }, keyInput, mbInput, setBtn);
  const status = h("p", { class: "muted" });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await api.call("PinService", "Set", keyInput.value, Number(mbInput.value));
      void renderPins();
    } catch (err) {
      status.textContent = errText(err);
    }
  });
  const table = h("table", { class: "pins" });
  try {
    const pins = await api.call<Pin[]>("PinService", "List");
    if (pins.length === 0) table.append(h("tr", {}, h("td", { class: "muted" }, "No GPU is pinned: the plan uses the largest device-local heap minus headroom.")));
    for (const p of pins) {
      const clear = h("button", { type: "button", class: "ghost" }, "Clear");
      clear.addEventListener("click", async () => {
        await api.call("PinService", "Clear", p.deviceKey);
        void renderPins();
      });
      table.append(h("tr", {}, h("td", {}, h("code", {}, p.deviceKey)), h("td", {}, `${p.mb} MiB`), h("td", {}, clear)));
    }
  } catch (e) {
    table.append(h("tr", {}, h("td", {}, `Could not list pins: ${errText(e)}`)));
  }
  pinsView.replaceChildren(
    h("h2", {}, "VRAM pins"),
    h("p", { class: "muted" }, "A pin caps the memory the resident plan may use on one GPU. VKLLM_GPU_VRAM_MB overrides every pin."),
    table,
    h("h3", {}, "Pin a GPU"),
    form,
    status,
  );
}

// ---- benchmark ---------------------------------------------------------------------------------

// Presets: llama-bench's default run, and a quick one for a first look or a small machine.
const benchPresets: Record<string, BenchSettings & { label: string }> = {
  standard: { label: "Standard · pp512 tg128 ×5", nPrompt: 512, nGen: 128, reps: 5 },
  quick: { label: "Quick · pp128 tg32 ×3", nPrompt: 128, nGen: 32, reps: 3 },
  custom: { label: "Custom", nPrompt: 0, nGen: 0, reps: 0 },
};

const bench = {
  running: false,
  groups: [] as BenchGroup[],
  justSaved: new Set<number>(),
};

const benchPreset = h("select", { id: "bench-preset", "aria-label": "preset" });
for (const [key, p] of Object.entries(benchPresets)) benchPreset.append(h("option", { value: key }, p.label));
const benchP = h("input", { id: "bench-p", type: "number", min: "0", max: "16384", title: "prompt tokens (pp test; 0 skips it)" });
const benchN = h("input", { id: "bench-n", type: "number", min: "0", max: "16384", title: "generated tokens (tg test; 0 skips it)" });
const benchR = h("input", { id: "bench-r", type: "number", min: "1", max: "100", title: "timed repetitions per test" });
const benchRun = h("button", { id: "bench-run", type: "submit", class: "primary" }, "Run benchmark");
const benchCancel = h("button", { id: "bench-cancel", type: "button", class: "ghost", hidden: "" }, "Cancel");
const benchForm = h(
  "form",
  { class: "bench-form", id: "bench-form" },
  h("label", {}, h("span", {}, "Preset"), benchPreset),
  h("label", {}, h("span", {}, "pp (prompt)"), benchP),
  h("label", {}, h("span", {}, "tg (generate)"), benchN),
  h("label", {}, h("span", {}, "reps"), benchR),
  h("div", { class: "bench-actions" }, benchCancel, benchRun),
);
const benchFill = h("div", { class: "bench-fill", id: "bench-fill" });
const benchBar = h("div", { class: "bench-bar", id: "bench-bar", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": "0" }, benchFill);
const benchStatus = h("div", { class: "bench-status muted", id: "bench-status" }, "");
const benchProgress = h("div", { class: "bench-progress", id: "bench-progress", hidden: "" }, benchBar, benchStatus);
const benchTarget = h("p", { class: "muted", id: "bench-target" });
const benchResults = h("div", { class: "bench-results", id: "bench-results" });
const importPath = h("input", { id: "bench-import-path", type: "text", placeholder: "/path/to/llama-bench.json or .jsonl", spellcheck: "false" });
const importBtn = h("button", { type: "submit", class: "ghost", id: "bench-import" }, "Import");
const importForm = h("form", { class: "inline-form" }, importPath, importBtn);
const importStatus = h("p", { class: "muted", id: "bench-import-status" });

benchView.append(
  h("h2", {}, "Benchmark"),
  h(
    "p",
    { class: "muted" },
    "llama-bench semantics: pp N is one batched prefill of N synthetic tokens, tg N is N single-token decode steps; " +
      "one untimed warm-up, then t/s as the mean of the repetitions ± sample standard deviation. Every run is kept per GPU.",
  ),
  benchTarget,
  benchForm,
  benchProgress,
  h("h3", {}, "Results"),
  benchResults,
  h("h3", {}, "Import llama-bench results"),
  h("p", { class: "muted" }, "Output of llama-bench -o json or -o jsonl: its rows sit beside ours under the same GPU, marked llama-bench."),
  importForm,
  importStatus,
);

function applyPreset(key: string) {
  const p = benchPresets[key];
  if (!p || key === "custom") return;
  benchP.value = String(p.nPrompt);
  benchN.value = String(p.nGen);
  benchR.value = String(p.reps);
}
benchPreset.addEventListener("change", () => applyPreset(benchPreset.value));
for (const inp of [benchP, benchN, benchR]) inp.addEventListener("input", () => (benchPreset.value = "custom"));
applyPreset("standard");

function setBenchRunning(on: boolean) {
  bench.running = on;
  benchRun.disabled = on;
  benchCancel.hidden = !on;
  for (const inp of [benchPreset, benchP, benchN, benchR]) inp.disabled = on;
  if (on) benchProgress.hidden = false;
}

// setBenchProgress moves the bar to fraction (a negative one keeps it where it is) and says text.
function setBenchProgress(fraction: number, text: string, tone = "") {
  if (fraction < 0) fraction = Number(benchBar.getAttribute("aria-valuenow")) / 100;
  const pct = Math.max(0, Math.min(100, Math.round(fraction * 100)));
  benchFill.style.width = `${pct}%`;
  benchBar.setAttribute("aria-valuenow", String(pct));
  benchBar.className = `bench-bar ${tone}`;
  benchStatus.textContent = text;
}

async function openBench() {
  const m = state.model;
  benchTarget.textContent = m
    ? `Runs on the loaded model: ${m.name} (${[m.arch, m.params ? formatParams(m.params) : "", m.quant].filter(Boolean).join(" ")}), ${m.placement || m.backend}, context ${m.context}.`
    : "";
  try {
    if (!bench.running && (await api.call<boolean>("BenchService", "Running"))) {
      setBenchRunning(true);
      setBenchProgress(0, "A run is in progress…");
    }
  } catch {
    // an older backend without Running: nothing to restore
  }
  await loadBenchHistory();
}

async function loadBenchHistory() {
  try {
    bench.groups = await api.call<BenchGroup[]>("BenchService", "History", { gpu: "", model: "" });
  } catch (e) {
    benchResults.replaceChildren(h("p", { class: "muted" }, `Could not load the history: ${errText(e)}`));
    return;
  }
  renderBenchResults();
}

function formatRate(r: BenchRow): Node {
  if (r.status !== "ok") {
    const badge = h("span", { class: `badge ${r.status === "cancelled" ? "warn" : "error"}` }, r.status);
    if (r.error) badge.title = r.error;
    return badge;
  }
  return h("span", { class: "rate" }, `${r.avgTs.toFixed(2)} ± ${r.stddevTs.toFixed(2)}`);
}

function formatDelta(r: BenchRow): Node {
  if (r.deltaPct === undefined || r.deltaPct === null) return h("span", { class: "muted" }, "—");
  const d = r.deltaPct;
  const sign = d > 0 ? "+" : "";
  const tone = Math.abs(d) < 2 ? "flat" : d > 0 ? "up" : "down";
  const el = h("span", { class: `delta ${tone}` }, `${sign}${d.toFixed(1)}%`);
  if (r.prevSource && r.prevSource !== r.source) el.append(h("span", { class: "muted vs" }, ` vs ${r.prevSource}`));
  el.title = `previous: ${(r.prevTs ?? 0).toFixed(2)} t/s (${r.prevSource ?? ""} run #${r.prevId ?? ""})`;
  return el;
}

// formatWhen is a short local date: "11-30 17:53" this year, "2025-11-30" before it.
function formatWhen(ms: number): string {
  const d = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, "0");
  const day = `${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  if (d.getFullYear() !== new Date().getFullYear()) return `${d.getFullYear()}-${day}`;
  return `${day} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function benchRowNode(r: BenchRow): HTMLElement {
  const model = h("td", { class: "model", title: `${r.modelFile}${r.modelType ? ` · ${r.modelType}` : ""}` }, r.model || "—");
  if (r.source !== "vkllm") model.append(" ", h("span", { class: "chip peer" }, r.source));
  return h(
    "tr",
    {
      class: `bench-row${r.source !== "vkllm" ? " peer" : ""}${bench.justSaved.has(r.id) ? " fresh" : ""}`,
      "data-id": String(r.id),
      "data-test": r.test,
      "data-status": r.status,
      "data-source": r.source,
    },
    model,
    h("td", { class: "test" }, r.test),
    h("td", { class: "num" }, formatRate(r)),
    h("td", { class: "num" }, formatDelta(r)),
    h("td", { class: "num" }, r.ttftMs > 0 ? `${r.ttftMs.toFixed(1)} ms` : "—"),
    h("td", {}, r.placement || "—"),
    h("td", {}, r.backend || "—"),
    h("td", { class: "when", title: new Date(r.createdAtMs).toLocaleString() }, formatWhen(r.createdAtMs)),
  );
}

function renderBenchResults() {
  if (bench.groups.length === 0) {
    benchResults.replaceChildren(h("p", { class: "muted", id: "bench-empty" }, "No runs yet: press Run benchmark, or import a llama-bench file."));
    return;
  }
  benchResults.replaceChildren(
    ...bench.groups.map((g) =>
      h(
        "div",
        { class: "card bench-group", "data-key": g.key, "data-label": g.label },
        h("div", { class: "card-head" }, h("strong", {}, g.label), h("span", { class: "chip" }, `${g.rows.length} run${g.rows.length === 1 ? "" : "s"}`)),
        h(
          "table",
          { class: "bench-table" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ...["Model", "Test", "t/s", "Δ prev", "TTFT", "Placement", "Backend", "Date"].map((c, i) => h("th", i >= 2 && i <= 4 ? { class: "num" } : {}, c)),
            ),
          ),
          h("tbody", {}, ...g.rows.map(benchRowNode)),
        ),
      ),
    ),
  );
}

benchForm.addEventListener("submit", async (e) => {
  e.preventDefault();
  if (bench.running) return;
  const settings: BenchSettings = {
    nPrompt: Number(benchP.value) > 0 ? Number(benchP.value) : -1,
    nGen: Number(benchN.value) > 0 ? Number(benchN.value) : -1,
    reps: Number(benchR.value) || 1,
  };
  setBenchRunning(true);
  setBenchProgress(0, "Starting…");
  try {
    await api.call<BenchRow[]>("BenchService", "Run", settings);
  } catch (err) {
    setBenchProgress(-1, `Failed: ${errText(err)}`, "failed");
  } finally {
    setBenchRunning(false);
    await loadBenchHistory();
  }
});

benchCancel.addEventListener("click", () => {
  benchStatus.textContent = "Cancelling…";
  void api.call("BenchService", "Cancel");
});

api.on("bench:event", (ev: BenchEvent) => {
  if (ev.kind === "progress") {
    if (!bench.running) setBenchRunning(true);
    if (ev.phase === "done") {
      setBenchProgress(1, "Saving…");
      return;
    }
    const step = ev.phase === "warmup" ? "warm-up" : `rep ${ev.rep}/${ev.reps}`;
    const rate = ev.tokensPerSec ? ` · ${ev.tokensPerSec.toFixed(1)} t/s` : "";
    setBenchProgress(ev.steps ? ev.step / ev.steps : 0, `${ev.test} ${step}${rate} · step ${ev.step} of ${ev.steps}`);
    return;
  }
  bench.justSaved = new Set((ev.rows ?? []).map((r) => r.id));
  if (ev.kind === "finished") {
    const summary = (ev.rows ?? []).map((r) => `${r.test} ${r.avgTs.toFixed(1)} t/s`).join(", ");
    setBenchProgress(1, `Done: ${summary}`, "done");
  } else if (ev.kind === "cancelled") {
    setBenchProgress(-1, "Cancelled: the finished tests and the cancelled one are in the history.", "cancelled");
  } else {
    setBenchProgress(-1, `Failed: ${ev.error ?? "unknown error"}`, "failed");
  }
  setBenchRunning(false);
  if (state.view === "bench") void loadBenchHistory();
});

importForm.addEventListener("submit", async (e) => {
  e.preventDefault();
  importBtn.disabled = true;
  importStatus.textContent = "Importing…";
  try {
    const n = await api.call<number>("BenchService", "Import", importPath.value);
    importStatus.textContent = `Imported ${n} llama-bench row${n === 1 ? "" : "s"}.`;
    importPath.value = "";
    await loadBenchHistory();
  } catch (err) {
    importStatus.textContent = errText(err);
  } finally {
    importBtn.disabled = false;
  }
});

// ---- start -------------------------------------------------------------------------------------

show("chat");
renderMessages();
void loadModel();
void loadConversations();
input.focus();
