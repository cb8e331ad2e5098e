// Conversations, the messages of the one shown, and the reply being generated, kept current by
// the chat:event and chat:delta events.
import { api, errText } from "../lib/api";
import type { ChatDelta, ChatEvent, ChatSettings, ContextPolicy, ContextUse, Conversation, Message } from "../types";
import { notice } from "./notice.svelte";
import { view } from "./view.svelte";

class ChatState {
  conversations = $state<Conversation[]>([]);
  current = $state(0); // conversation id shown; 0 = a new chat not yet saved
  messages = $state<Message[]>([]);
  sending = $state(false);
  contextUse = $state<ContextUse | null>(null);
  newChatPolicy = $state<ContextPolicy>("rolling"); // the policy picked before a new chat is saved
  // Bumped whenever the composer should take the focus (a new chat, a reply that ended).
  focusComposer = $state(0);
  // The generation settings of the conversation shown; for a new chat, the ones it will start with.
  settings = $state<ChatSettings | null>(null);
  settingsError = $state("");
  private newChatSettingsEdited = false; // the settings of a new chat were changed before its first message

  private sendingConv = 0; // the conversation whose reply is generating (Stop targets it)
  private awaitingNew = false; // a first message was sent from a new chat; its conversation is being made

  // policy is the context policy of the conversation shown (or the one picked for a new chat).
  get policy(): ContextPolicy {
    const c = this.conversations.find((x) => x.id === this.current);
    return c ? c.contextPolicy || "rolling" : this.newChatPolicy;
  }

  async loadConversations() {
    try {
      this.conversations = await api.call<Conversation[]>("ChatService", "ListConversations");
    } catch (e) {
      notice.show(`Could not list conversations: ${errText(e)}`, "error");
    }
  }

  async open(id: number) {
    this.current = id;
    view.show("chat");
    this.contextUse = null;
    this.settingsError = "";
    this.settings = null;
    if (id === 0) {
      this.newChatSettingsEdited = false;
      this.newChatPolicy = "rolling";
    }
    void this.loadSettings(id);
    try {
      this.messages = id ? await api.call<Message[]>("ChatService", "Messages", id) : [];
    } catch (e) {
      notice.show(`Could not load the conversation: ${errText(e)}`, "error");
      this.messages = [];
    }
  }

  private async loadSettings(id: number) {
    try {
      const cs = id ? await api.call<ChatSettings>("ChatService", "ConversationSettings", id) : await api.call<ChatSettings>("ChatService", "DefaultSettings");
      if (this.current === id) this.settings = cs;
    } catch (e) {
      this.settingsError = errText(e);
    }
  }

  // saveSettings checks and keeps the settings of the conversation shown (of a new chat: until
  // its first message creates it). It throws the refusal naming the setting out of range.
  async saveSettings(cs: ChatSettings) {
    if (this.current === 0) {
      this.settings = cs;
      this.newChatSettingsEdited = true;
      return;
    }
    this.settings = await api.call<ChatSettings>("ChatService", "SetConversationSettings", this.current, cs);
  }

  async newChat() {
    await this.open(0);
    this.focusComposer++;
  }

  async remove(id: number) {
    try {
      await api.call("ChatService", "DeleteConversation", id);
    } catch (e) {
      notice.show(`Could not delete the conversation: ${errText(e)}`, "error");
    }
    if (this.current === id) await this.open(0);
    await this.loadConversations();
  }

  async setPolicy(policy: ContextPolicy) {
    if (this.current === 0) {
      this.newChatPolicy = policy;
      return;
    }
    await this.savePolicy(this.current, policy);
  }

  private async savePolicy(conversationId: number, policy: ContextPolicy) {
    try {
      const c = await api.call<Conversation>("ChatService", "SetContextPolicy", conversationId, policy);
      const i = this.conversations.findIndex((x) => x.id === c.id);
      if (i >= 0) this.conversations[i] = c;
    } catch (e) {
      notice.show(`Could not change what happens when the context is full: ${errText(e)}`, "error");
    }
  }

  // replace puts the saved form of a message in place of the one shown (or appends it).
  replace(m: Message) {
    const i = this.messages.findIndex((x) => x.id === m.id);
    if (i >= 0) this.messages[i] = m;
    else this.messages.push(m);
  }

  async send(text: string): Promise<boolean> {
    text = text.trim();
    if (!text || this.sending) return false;
    this.sending = true;
    try {
      if (this.current === 0 && (this.newChatSettingsEdited || this.newChatPolicy !== "rolling")) await this.createWithChoices(text);
    } catch (e) {
      notice.show(`Could not start the conversation: ${errText(e)}`, "error");
      this.sending = false;
      return false;
    }
    this.sendingConv = this.current;
    this.awaitingNew = this.current === 0;
    try {
      const reply = await api.call<Message>("ChatService", "Send", this.current, text);
      if (this.current === 0) await this.open(reply.conversationId); // the started event was missed
      else if (reply.conversationId === this.current) this.replace(reply);
    } catch (e) {
      notice.show(`The reply failed: ${errText(e)}`, "error");
    } finally {
      this.awaitingNew = false;
      this.sending = false;
      await this.loadConversations();
      this.focusComposer++;
    }
    return true;
  }

  // createWithChoices saves a new chat before its first message, with the settings and context
  // policy picked for it, so that first reply already uses them.
  private async createWithChoices(text: string) {
    const c = await api.call<Conversation>("ChatService", "CreateConversation", text);
    if (this.newChatSettingsEdited && this.settings) await api.call("ChatService", "SetConversationSettings", c.id, this.settings);
    if (this.newChatPolicy !== "rolling") await api.call("ChatService", "SetContextPolicy", c.id, this.newChatPolicy);
    this.newChatSettingsEdited = false;
    this.current = c.id;
    await this.loadConversations();
  }

  // act runs a message action that generates (regenerate, edit, continue): the messages it
  // replaces leave the list first, the reply then streams in like a new one.
  private async act(label: string, dropFrom: number, call: () => Promise<Message>) {
    if (this.sending) return;
    this.sending = true;
    this.sendingConv = this.current;
    if (dropFrom >= 0) this.messages = this.messages.slice(0, dropFrom);
    try {
      const reply = await call();
      if (reply.conversationId === this.current) this.replace(reply);
    } catch (e) {
      notice.show(`${label} failed: ${errText(e)}`, "error");
      await this.open(this.current);
    } finally {
      this.sending = false;
      await this.loadConversations();
      this.focusComposer++;
    }
  }

  regenerate(m: Message) {
    const conv = this.current;
    return this.act("Regenerate", this.messages.indexOf(m), () => api.call<Message>("ChatService", "Regenerate", conv, m.id));
  }

  edit(m: Message, text: string) {
    const conv = this.current;
    return this.act("Edit and resend", this.messages.indexOf(m), () => api.call<Message>("ChatService", "Edit", conv, m.id, text));
  }

  continueReply(m: Message) {
    const conv = this.current;
    return this.act("Continue", -1, () => api.call<Message>("ChatService", "Continue", conv, m.id));
  }

  async deleteMessage(m: Message) {
    try {
      await api.call("ChatService", "DeleteMessage", this.current, m.id);
      this.messages = this.messages.filter((x) => x.id !== m.id);
    } catch (e) {
      notice.show(`Could not delete the message: ${errText(e)}`, "error");
    }
  }

  stop() {
    void api.call("ChatService", "Stop", this.sendingConv);
  }

  onEvent(ev: ChatEvent) {
    if (ev.kind === "started") {
      if (this.sending && this.sendingConv === 0) this.sendingConv = ev.conversationId;
      if (this.awaitingNew && ev.conversation) {
        this.awaitingNew = false;
        this.current = ev.conversationId;
        const policy = this.newChatPolicy;
        void (policy !== ev.conversation.contextPolicy ? this.savePolicy(ev.conversationId, policy) : Promise.resolve()).then(() => this.loadConversations());
      }
      if (ev.conversationId !== this.current) return;
      if (ev.user) this.replace(ev.user);
      this.replace(ev.assistant); // a continued reply is already in the list

    } else if (ev.kind === "finished") {
      if (ev.conversationId !== this.current) return;
      this.replace(ev.assistant);
      if (ev.context) this.contextUse = ev.context;
    }
  }

  onDelta(d: ChatDelta) {
    if (d.conversationId !== this.current) return;
    const m = this.messages.find((x) => x.id === d.messageId);
    if (m) m.content += d.text;
  }
}

export const chat = new ChatState();

api.on("chat:event", (ev: ChatEvent) => chat.onEvent(ev));
api.on("chat:delta", (d: ChatDelta) => chat.onDelta(d));
