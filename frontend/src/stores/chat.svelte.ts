// Conversations, the messages of the one shown, and the reply being generated, kept current by
// the chat:event and chat:delta events.
import { api, errText } from "../lib/api";
import type { ChatDelta, ChatEvent, ChatSettings, ContextPolicy, ContextUse, Conversation, ConversationExport, Message } from "../types";
import { saveFile } from "../lib/save";
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
  // The search over titles and message text: the query typed, and the conversations it found
  // (null = no search, the whole list shows).
  query = $state("");
  found = $state<Conversation[] | null>(null);
  // The conversation deleted last, while its Undo is offered; the store removes it for good when
  // the Undo expires (or, had the app closed first, at its next start).
  undoable = $state<{ id: number; title: string } | null>(null);
  // Set to a user message's id to open its editor (Up in an empty composer); MessageItem clears it.
  editRequest = $state(0);
  private undoTimer: ReturnType<typeof setTimeout> | undefined;
  private searchSeq = 0;
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

  // shown is the list the sidebar shows: the search's hits while there is a query.
  get shown(): Conversation[] {
    return this.found ?? this.conversations;
  }

  async search(query: string) {
    this.query = query;
    const seq = ++this.searchSeq;
    if (!query.trim()) {
      this.found = null;
      return;
    }
    try {
      const hits = await api.call<Conversation[]>("ChatService", "SearchConversations", query);
      if (seq === this.searchSeq) this.found = hits;
    } catch (e) {
      notice.show(`Could not search the conversations: ${errText(e)}`, "error");
    }
  }

  private async refreshList() {
    await this.loadConversations();
    if (this.query.trim()) await this.search(this.query);
  }

  async rename(id: number, title: string): Promise<boolean> {
    try {
      const c = await api.call<Conversation>("ChatService", "RenameConversation", id, title);
      const i = this.conversations.findIndex((x) => x.id === c.id);
      if (i >= 0) this.conversations[i] = c;
      await this.refreshList();
      return true;
    } catch (e) {
      notice.show(`Could not rename the conversation: ${errText(e)}`, "error");
      return false;
    }
  }

  // remove deletes a conversation with an Undo offered for undoSeconds; a second delete ends the
  // first one's Undo (that conversation goes for good).
  async remove(id: number) {
    const title = this.conversations.find((x) => x.id === id)?.title ?? "";
    try {
      await api.call("ChatService", "TrashConversation", id);
    } catch (e) {
      notice.show(`Could not delete the conversation: ${errText(e)}`, "error");
      return;
    }
    await this.expireUndo();
    this.undoable = { id, title };
    this.undoTimer = setTimeout(() => void this.expireUndo(), undoSeconds * 1000);
    if (this.current === id) await this.open(0);
    await this.refreshList();
  }

  async undoRemove() {
    const u = this.undoable;
    if (!u) return;
    clearTimeout(this.undoTimer);
    this.undoable = null;
    try {
      await api.call<Conversation>("ChatService", "RestoreConversation", u.id);
    } catch (e) {
      notice.show(`Could not undo the delete: ${errText(e)}`, "error");
      return;
    }
    await this.refreshList();
    await this.open(u.id);
  }

  private async expireUndo() {
    const u = this.undoable;
    if (!u) return;
    clearTimeout(this.undoTimer);
    this.undoable = null;
    try {
      await api.call("ChatService", "DeleteConversation", u.id);
    } catch (e) {
      notice.show(`Could not remove the deleted conversation: ${errText(e)}`, "error");
    }
  }

  async exportConversation(id: number, format: "markdown" | "json") {
    try {
      const f = await api.call<ConversationExport>("ChatService", "ExportConversation", id, format);
      saveFile(f.fileName, f.mimeType, f.content);
    } catch (e) {
      notice.show(`Could not export the conversation: ${errText(e)}`, "error");
    }
  }

  // editLastUserMessage opens the editor of the conversation's last user message (Up in an
  // empty composer); false when there is none or a reply is generating.
  editLastUserMessage(): boolean {
    if (this.sending) return false;
    const last = [...this.messages].reverse().find((m) => m.role === "user");
    if (!last) return false;
    this.editRequest = last.id;
    return true;
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
      await this.refreshList();
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

  // regenerate answers again into the same message; its earlier text stays as an alternative.
  regenerate(m: Message) {
    const conv = this.current;
    return this.act("Regenerate", this.messages.indexOf(m) + 1, () => api.call<Message>("ChatService", "Regenerate", conv, m.id));
  }

  // showAlternative flips a regenerated reply to its version index (0-based); that version is
  // the one later turns see.
  async showAlternative(m: Message, index: number) {
    if (this.sending || index < 0 || index >= m.altCount) return;
    try {
      this.replace(await api.call<Message>("ChatService", "SelectAlternative", this.current, m.id, index));
    } catch (e) {
      notice.show(`Could not show that version: ${errText(e)}`, "error");
    }
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

// undoSeconds is how long a deleted conversation can be brought back.
export const undoSeconds = 8;

export const chat = new ChatState();

api.on("chat:event", (ev: ChatEvent) => chat.onEvent(ev));
api.on("chat:delta", (d: ChatDelta) => chat.onDelta(d));
