package sidecar

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTokenizeRouteCountsAChatAndSaysWhenItCannotFit(t *testing.T) {
	ts := startServer(t, ServeOptions{}) // the real engine with the embedded model
	body := func(words int) string {
		b, _ := json.Marshal(map[string]any{"messages": []map[string]string{
			{"role": "system", "content": "You tell stories."},
			{"role": "user", "content": strings.TrimSpace(strings.Repeat("fox ", words))},
		}})
		return string(b)
	}
	var short, long PromptCount
	if code := ts.do(t, "POST", "/vkllm/tokenize", body(3), &short); code != 200 {
		t.Fatalf("tokenize a short chat: %d", code)
	}
	if code := ts.do(t, "POST", "/vkllm/tokenize", body(30), &long); code != 200 {
		t.Fatalf("tokenize a longer chat: %d", code)
	}
	if short.TooLong || short.Tokens < 4 || short.Context <= 0 || long.Tokens <= short.Tokens {
		t.Fatalf("counts %+v then %+v: want a few tokens, the context, and more for more words", short, long)
	}
	var over PromptCount
	if code := ts.do(t, "POST", "/vkllm/tokenize", body(3*short.Context), &over); code != 200 {
		t.Fatalf("tokenize a chat past the context: %d, want 200 with too_long", code)
	}
	if !over.TooLong || over.Tokens < over.Context || over.Context != short.Context {
		t.Fatalf("a chat of %d words in a context of %d: %+v, want too_long with at least the context's tokens", 3*short.Context, short.Context, over)
	}
	if code := ts.do(t, "POST", "/vkllm/tokenize", `{"messages":[]}`, nil); code != 400 {
		t.Fatalf("tokenize no messages: %d, want 400", code)
	}
}
