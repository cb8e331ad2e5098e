package main

import (
	"context"

	"github.com/vkllm/vkllm/app"
	"github.com/vkllm/vkllm/store"
)

// storeAdapter lets *store.Store serve as the app's ChatStore and PinStore. The app's types carry
// the UI's JSON names; the fields are the same, so the conversions are plain.
type storeAdapter struct{ st *store.Store }

func (a storeAdapter) CreateConversation(ctx context.Context, title, model string) (app.Conversation, error) {
	c, err := a.st.CreateConversation(ctx, title, model)
	return app.Conversation(c), err
}

func (a storeAdapter) ListConversations(ctx context.Context) ([]app.Conversation, error) {
	list, err := a.st.ListConversations(ctx)
	out := make([]app.Conversation, len(list))
	for i, c := range list {
		out[i] = app.Conversation(c)
	}
	return out, err
}

func (a storeAdapter) DeleteConversation(ctx context.Context, id int64) error {
	return a.st.DeleteConversation(ctx, id)
}

func (a storeAdapter) Conversation(ctx context.Context, id int64) (app.Conversation, error) {
	c, err := a.st.Conversation(ctx, id)
	return app.Conversation(c), err
}

func (a storeAdapter) SetContextPolicy(ctx context.Context, id int64, policy string) error {
	return a.st.SetContextPolicy(ctx, id, policy)
}

func (a storeAdapter) SetConversationSettings(ctx context.Context, id int64, settings string) error {
	return a.st.SetConversationSettings(ctx, id, settings)
}

func (a storeAdapter) DeleteMessages(ctx context.Context, conversationID, fromID int64, andLater bool) (int64, error) {
	return a.st.DeleteMessages(ctx, conversationID, fromID, andLater)
}

func (a storeAdapter) AddMessage(ctx context.Context, m app.Message) (app.Message, error) {
	saved, err := a.st.AddMessage(ctx, store.Message(m))
	return app.Message(saved), err
}

func (a storeAdapter) UpdateMessage(ctx context.Context, m app.Message) error {
	return a.st.UpdateMessage(ctx, store.Message(m))
}

func (a storeAdapter) Messages(ctx context.Context, conversationID int64) ([]app.Message, error) {
	list, err := a.st.Messages(ctx, conversationID)
	out := make([]app.Message, len(list))
	for i, m := range list {
		out[i] = app.Message(m)
	}
	return out, err
}

func (a storeAdapter) NewAlternative(ctx context.Context, messageID int64) (app.Message, error) {
	m, err := a.st.NewAlternative(ctx, messageID)
	return app.Message(m), err
}

func (a storeAdapter) SelectAlternative(ctx context.Context, messageID int64, n int) (app.Message, error) {
	m, err := a.st.SelectAlternative(ctx, messageID, n)
	return app.Message(m), err
}

func (a storeAdapter) SetPin(ctx context.Context, deviceKey string, mb int) error {
	return a.st.SetPin(ctx, deviceKey, mb)
}

func (a storeAdapter) ListPins(ctx context.Context) ([]app.Pin, error) {
	list, err := a.st.ListPins(ctx)
	out := make([]app.Pin, len(list))
	for i, p := range list {
		out[i] = app.Pin{DeviceKey: p.DeviceKey, MB: p.MB}
	}
	return out, err
}

func (a storeAdapter) ClearPin(ctx context.Context, deviceKey string) error {
	return a.st.ClearPin(ctx, deviceKey)
}

func (a storeAdapter) RenameConversation(ctx context.Context, id int64, title string) error {
	return a.st.RenameConversation(ctx, id, title)
}

func (a storeAdapter) SearchConversations(ctx context.Context, text string) ([]app.Conversation, error) {
	list, err := a.st.SearchConversations(ctx, text)
	out := make([]app.Conversation, len(list))
	for i, c := range list {
		out[i] = app.Conversation(c)
	}
	return out, err
}

func (a storeAdapter) TrashConversation(ctx context.Context, id int64) error {
	return a.st.TrashConversation(ctx, id)
}

func (a storeAdapter) RestoreConversation(ctx context.Context, id int64) error {
	return a.st.RestoreConversation(ctx, id)
}
