// Shapes of what the Go services return and emit (app/app.go, app/chat.go).

export interface Conversation {
  id: number;
  title: string;
  model: string;
  createdAtMs: number;
  updatedAtMs: number;
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
}

export interface ChatEvent {
  kind: "started" | "finished";
  conversationId: number;
  conversation?: Conversation;
  user?: Message;
  assistant: Message;
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
}

export interface EngineEvent {
  kind: "started" | "restarted" | "stopped" | "model";
  reason?: string;
  model?: ModelInfo;
  atMs: number;
}

export interface Pin {
  deviceKey: string;
  mb: number;
}
