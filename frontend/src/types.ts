// Shapes of what the Go services return and emit (app/app.go, app/chat.go).

export interface Conversation {
  id: number;
  title: string;
  model: string;
  createdAtMs: number;
  updatedAtMs: number;
  contextPolicy: ContextPolicy;
  // snippet is the text around a search hit's match (absent when the title matched, and
  // outside a search).
  snippet?: string;
}

// ConversationExport is one conversation written out as a file (ChatService.ExportConversation).
export interface ConversationExport {
  fileName: string;
  mimeType: string;
  content: string;
}

// What a conversation does once its history outgrows the context (app/context.go).
export type ContextPolicy = "rolling" | "truncate-middle" | "stop";

// How much of the context one reply took (app.ContextUse).
export interface ContextUse {
  used: number;
  context: number;
  promptTokens: number;
  dropped: number;
  policy: ContextPolicy;
  evaluated: number; // prompt tokens the engine evaluated; the rest came from its cache (0 = unknown)
}

export type MessageState = "complete" | "streaming" | "interrupted" | "error";

export interface Message {
  id: number;
  conversationId: number;
  role: "user" | "assistant" | "system";
  content: string;
  state: MessageState;
  model: string;
  tokensPerSec: number;
  ttftMs: number;
  settings: string;
  createdAtMs: number;
  stopReason: StopReason;
  // A regenerated reply's versions: which one this is (0-based) and how many (0 = none).
  altIndex: number;
  altCount: number;
}

// Why a reply ended (app.Message.StopReason): "" = unknown, or a user message.
export type StopReason = "" | "eos" | "length" | "stop" | "cancelled";

// The sampler's parameters (engine/sample.Params).
export interface Sampling {
  temperature: number; // 0 = greedy
  top_k: number; // 0 = off
  top_p: number; // 0 or 1 = off
  min_p: number; // 0 = off
  repeat_penalty: number; // 0 or 1 = off
  repeat_last_n: number; // 0 = 64
  seed: number; // 0 = drawn from the clock
}

// A conversation's generation settings (app.ChatSettings).
export interface ChatSettings {
  systemPrompt: string;
  maxTokens: number;
  sampling: Sampling;
}

export interface ChatEvent {
  kind: "started" | "finished";
  conversationId: number;
  conversation?: Conversation;
  user?: Message;
  assistant: Message;
  context?: ContextUse;
  atMs: number;
}

export interface ChatDelta {
  kind: "delta";
  conversationId: number;
  messageId: number;
  text: string;
  atMs: number;
}

export interface ModelInfo {
  name: string;
  path: string;
  arch: string;
  params: number;
  file_size: number;
  quant: string;
  context_length: number;
  context: number;
  layers: number;
  dim: number;
  vocab_size: number;
  backend: string;
  placement: string;
  has_chat_template: boolean;
  cpu_reason?: string; // on the CPU: why, in one sentence (a setting, no Vulkan device, the plan's verdict)
}

export interface EngineEvent {
  kind: "started" | "restarted" | "stopped" | "model" | "unloaded";
  reason?: string;
  model?: ModelInfo;
  atMs: number;
}

export interface Pin {
  deviceKey: string;
  mb: number;
}

// ---- benchmark (app/bench.go) ------------------------------------------------------------------

export interface BenchSettings {
  nPrompt: number; // -1 skips the pp test
  nGen: number; // -1 skips the tg test
  reps: number;
  preset?: "" | "localscore"; // localscore: LocalScore's nine shapes as one run; nPrompt/nGen ignored
}

export type BenchStatus = "ok" | "failed" | "cancelled";

export interface BenchRow {
  id: number;
  createdAtMs: number;
  source: "vkllm" | "llama-bench" | string;
  status: BenchStatus;
  error?: string;
  gpuKey: string;
  gpuName: string;
  backend: string;
  model: string;
  modelFile: string;
  modelType: string;
  test: string;
  reps: number;
  avgTs: number;
  stddevTs: number;
  ttftMs: number;
  placement: string;
  runKey: string; // the run the row belongs to
  cpu: string;
  quant: string;
  nPrompt: number;
  nGen: number;
  nDepth: number;
  commit: string;
  decode?: string; // how a tg row's steps ran: logits, greedy, greedy-chained
  samples: number[] | null; // the repetitions' t/s
  noisy: boolean; // spread over 5% of the mean
  noisyReason?: string;
  prevId?: number;
  prevSource?: string;
  prevTs?: number;
  prevDecode?: string; // how the previous run's tg steps ran, where it says
  deltaPct?: number;
}

export interface BenchGroup {
  key: string;
  label: string;
  kind: "gpu" | "cpu";
  rows: BenchRow[];
  runs: number; // runs, not rows
  scores: RunScore[];
}

// A run's LocalScore (engine/bench/localscore.go): 10·cbrt(pp t/s · tg t/s · 1000/TTFT ms).
export interface RunScore {
  runKey: string;
  model: string;
  createdAtMs: number;
  score: number;
  ppTs: number;
  tgTs: number;
  ttftMs: number;
  shapes: number; // of LocalScore's nine
}

export interface ImportResult {
  added: number;
  duplicates: number;
  ids?: number[];
}

export type ExportFormat = "csv" | "json" | "jsonl" | "md";

export interface BenchEvent {
  kind: "progress" | "finished" | "failed" | "cancelled";
  test?: string;
  phase?: "warmup" | "rep" | "done";
  rep: number;
  reps: number;
  step: number;
  steps: number;
  tokensPerSec?: number;
  rows?: BenchRow[];
  error?: string;
  atMs: number;
}

// ---- model library (app/models_library.go, app/models_open.go) ---------------------------------

// A model of the library (library.Model): a GGUF file a scan found, from its header alone.
export interface LibraryModel {
  path: string;
  source: "llama.cpp" | "lmstudio" | "ollama" | "huggingface" | "folder" | string;
  name: string;
  arch: string;
  params: number;
  quant: string;
  sizeBytes: number;
  contextLength: number;
  parts: number;
  fileMtimeMs: number;
  headerOnly: boolean;
  problem: string; // why the engine cannot run it; "" = it can
}

export interface ScanProgress {
  root: string;
  found: number;
  read: number;
  unchanged: number;
  current: string;
}

export interface ScanState {
  running: boolean;
  progress: ScanProgress;
  error?: string;
  skipped?: string[];
  doneAtMs?: number;
}

export interface LibraryRoot {
  path: string;
  source: string;
  exists: boolean;
  added: boolean;
}

export interface LibraryEvent {
  kind: "progress" | "finished" | "failed" | "dropped";
  progress?: ScanProgress;
  models?: number;
  removed?: number;
  skipped?: string[];
  error?: string;
  path?: string;
  atMs: number;
}

export interface RecentModel {
  path: string;
  name: string;
  exists: boolean;
}
