package engine

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// captureLog sends slog's default logger to a buffer for the test.
func captureLog(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &buf
}

// A model file whose chat template is hostile still chats: within two seconds, in the plain
// format, with one warning that names the file; later chats skip the template at once.
func TestHostileChatTemplateFallsBackToThePlainFormatNamingTheFile(t *testing.T) {
	cases := []struct{ name, tmpl string }{
		{"recursive macro", `{% macro f(m) %}{{ f(m) }}{% endmacro %}{% for m in messages %}{{ f(m) }}{% endfor %}`},
		{"range of a billion", `{% for i in range(1000000000) %}{{ i }}{% endfor %}`},
		{"a string two billion long", `{{ 'a' * 2000000000 }}`},
		{"nested loops", `{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := modeltest.Small("qwen2", quant.Q8_0, 3)
			s.ChatTemplate = c.tmpl
			path := writeRandom(t, s)
			e, err := Load(context.Background(), LoadOptions{Path: path, Backend: BackendCPU, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			log := captureLog(t)
			msgs := []Message{{Role: "user", Content: "Hello world"}}

			start := time.Now()
			res, err := e.Generate(context.Background(), GenerateRequest{Messages: msgs, MaxTokens: 2}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("first chat took %v, want under 2s", took)
			}
			want, _ := e.Tokenize("User: Hello world\nAssistant:", true)
			if !slices.Equal(res.PromptTokens, want) {
				t.Errorf("prompt tokens %v, want the plain format's %v", res.PromptTokens, want)
			}
			if n := strings.Count(log.String(), "reached a render limit"); n != 1 || !strings.Contains(log.String(), path) {
				t.Errorf("log has %d limit warnings, want 1 naming %s:\n%s", n, path, log)
			}

			// Under a cancelled context a second try of the template fails at once; the plain
			// format, which the model now uses, does not look at the context.
			cancelled, cancel := context.WithCancel(context.Background())
			cancel()
			text, err := e.RenderChat(cancelled, msgs)
			if err != nil || text != "User: Hello world\nAssistant:" {
				t.Fatalf("second render = %q, %v: the template ran again", text, err)
			}
			if n := strings.Count(log.String(), "reached a render limit"); n != 1 {
				t.Errorf("log has %d limit warnings after the second chat, want still 1", n)
			}
		})
	}
}

// A template that merely fails on one conversation (raise_exception) keeps being used.
func TestTemplateThatRaisesFallsBackForThatConversationOnly(t *testing.T) {
	s := modeltest.Small("qwen2", quant.Q8_0, 3)
	s.ChatTemplate = `{% if messages[0].role == 'system' %}{{ raise_exception('no system turns') }}{% endif %}{% for m in messages %}[{{ m.content }}]{% endfor %}`
	e, err := Load(context.Background(), LoadOptions{Path: writeRandom(t, s), Backend: BackendCPU, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	captureLog(t)
	text, err := e.RenderChat(context.Background(), []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}})
	if err != nil || text != "System: s\nUser: u\nAssistant:" {
		t.Fatalf("with a system turn: %q, %v; want the plain format", text, err)
	}
	text, err = e.RenderChat(context.Background(), []Message{{Role: "user", Content: "u"}})
	if err != nil || text != "[u]" {
		t.Fatalf("without one: %q, %v; want the template's output", text, err)
	}
}

func TestCancelledChatDoesNotFallBack(t *testing.T) {
	s := modeltest.Small("qwen2", quant.Q8_0, 3)
	s.ChatTemplate = chatML
	e, err := Load(context.Background(), LoadOptions{Path: writeRandom(t, s), Backend: BackendCPU, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if text, err := e.RenderChat(ctx, []Message{{Role: "user", Content: "u"}}); err == nil {
		t.Fatalf("RenderChat on a cancelled context = %q, want an error", text)
	}
}
