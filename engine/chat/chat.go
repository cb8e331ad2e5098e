// Package chat turns a conversation into the prompt text a model expects: the model's own Jinja
// chat template (GGUF tokenizer.chat_template), or a plain fallback format for models that have
// none. Templates come from model files, so they are rendered under limits (recursion depth,
// steps, bytes, wall time, the caller's context) by internal/jinja, vkllm's bounded fork of
// github.com/ardanlabs/jinja.
package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/vkllm/vkllm/engine/chat/internal/jinja"
	"github.com/vkllm/vkllm/engine/gguf"
)

// Message is one chat turn. Role is "system", "user" or "assistant".
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// TemplateKey is the GGUF metadata key of the chat template.
const TemplateKey = "tokenizer.chat_template"

// ErrNoTemplate is returned by Render for an empty template: the caller should use Fallback.
var ErrNoTemplate = errors.New("the model has no chat template")

// ErrLimit is wrapped by Render's error when the template reached a render limit (recursion
// depth, steps, bytes or time): a hostile or broken template. The caller should use Fallback.
var ErrLimit = jinja.ErrLimit

// Limits bound one render. Render uses DefaultLimits (100 nested macro calls, 1M steps, 64 MiB
// of text, 1 s), with the byte limit raised to bytesPerInputByte times the conversation's size
// for long conversations.
type Limits = jinja.Limits

var DefaultLimits = jinja.DefaultLimits

// bytesPerInputByte is how much text a render may build per byte of the conversation: the
// published templates build at most 4x their output, which is about the conversation's size.
const bytesPerInputByte = 8

// Template returns the model's chat template from GGUF metadata ("" and false when it has none).
func Template(f *gguf.File) (string, bool) {
	s, ok := f.String(TemplateKey)
	if !ok || strings.TrimSpace(s) == "" {
		return "", false
	}
	return s, true
}

// compiled templates by source: a model's template is rendered once per chat request.
var cache sync.Map // string -> *jinja.Template

func compile(src string) (*jinja.Template, error) {
	if t, ok := cache.Load(src); ok {
		return t.(*jinja.Template), nil
	}
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, err
	}
	cache.Store(src, t)
	return t, nil
}

// Render renders a Jinja chat template with the variables chat templates expect: messages (each with
// role and content), add_generation_prompt, bos_token and eos_token. An empty template gives
// ErrNoTemplate; a template that does not compile or raises an exception (e.g. "roles must
// alternate") gives an error saying so, and one that reaches a render limit an error wrapping
// ErrLimit. In those cases the caller may fall back to Fallback. When ctx ends the render stops
// with an error wrapping ctx.Err().
func Render(ctx context.Context, tmpl string, msgs []Message, addGenerationPrompt bool, bosToken, eosToken string) (string, error) {
	return render(ctx, tmpl, msgs, addGenerationPrompt, bosToken, eosToken, Limits{})
}

// render is Render under lim (zero fields take Render's limits).
func render(ctx context.Context, tmpl string, msgs []Message, addGenerationPrompt bool, bosToken, eosToken string, lim Limits) (string, error) {
	if strings.TrimSpace(tmpl) == "" {
		return "", ErrNoTemplate
	}
	t, err := compile(tmpl)
	if err != nil {
		return "", fmt.Errorf("compile chat template: %w", err)
	}
	list := make([]any, len(msgs))
	size := int64(len(bosToken) + len(eosToken))
	for i, m := range msgs {
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
		size += int64(len(m.Role) + len(m.Content))
	}
	if lim.MaxBytes == 0 {
		lim.MaxBytes = max(DefaultLimits.MaxBytes, bytesPerInputByte*size)
	}
	out, err := t.RenderContext(ctx, map[string]any{
		"messages":              list,
		"add_generation_prompt": addGenerationPrompt,
		"bos_token":             bosToken,
		"eos_token":             eosToken,
	}, lim)
	if err != nil {
		return "", fmt.Errorf("render chat template: %w", err)
	}
	return out, nil
}

// Fallback formats a conversation for a model without a usable template, one turn per line:
//
//	System: <content>
//	User: <content>
//	Assistant: <content>
//
// Roles are capitalised as written ("tool" becomes "Tool:"). With addGenerationPrompt the text ends
// with "Assistant:" so the model continues as the assistant. The format needs no special tokens, so
// it suits base models such as the TinyStories default.
func Fallback(msgs []Message, addGenerationPrompt bool) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(roleLabel(m.Role))
		b.WriteString(": ")
		b.WriteString(m.Content)
		b.WriteString("\n")
	}
	if addGenerationPrompt {
		b.WriteString("Assistant:")
	}
	return b.String()
}

func roleLabel(role string) string {
	if role == "" {
		return "User"
	}
	r, n := utf8.DecodeRuneInString(role)
	return string(unicode.ToUpper(r)) + role[n:]
}
