package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// A conversation that ends with a partial assistant reply renders so that the model continues
// the reply (no end-of-turn after it, no new turn), with the template and in the plain format;
// a template that rewrites the reply falls back to a new turn; a final user message still opens
// the assistant's turn.
func TestRenderChatContinuesAFinalAssistantReply(t *testing.T) {
	partial := []Message{{Role: "user", Content: "Tell a story"}, {Role: "assistant", Content: "Once upon a"}}
	for _, tc := range []struct {
		name, tmpl string
		msgs       []Message
		want       string
	}{
		{"chatml continues the reply", chatML, partial,
			"<|im_start|>user\nTell a story<|im_end|>\n<|im_start|>assistant\nOnce upon a"},
		{"chatml, a user message opens a turn", chatML, partial[:1],
			"<|im_start|>user\nTell a story<|im_end|>\n<|im_start|>assistant\n"},
		{"a template that rewrites replies starts a new turn", strings.ReplaceAll(chatML, "{{ m.content }}", "{{ m.content | upper }}"), partial,
			"<|im_start|>user\nTELL A STORY<|im_end|>\n<|im_start|>assistant\nONCE UPON A<|im_end|>\n<|im_start|>assistant\n"},
		{"the plain format continues the reply", "", partial, "User: Tell a story\nAssistant: Once upon a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := modeltest.Small("qwen2", quant.Q8_0, 3)
			s.ChatTemplate = tc.tmpl
			e, err := Load(context.Background(), LoadOptions{Path: writeRandom(t, s), Backend: BackendCPU, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			got, err := e.RenderChat(context.Background(), tc.msgs)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("rendered\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
