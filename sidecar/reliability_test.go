package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// send makes one authorized request with the body read from r and returns the status, the
// response body and how long the answer took.
func (ts testServer) send(t *testing.T, method, path string, r io.Reader) (int, string, time.Duration) {
	t.Helper()
	req, err := http.NewRequest(method, ts.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ts.token)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), time.Since(start)
}

func (ts testServer) sendString(t *testing.T, method, path, body string) (int, string, time.Duration) {
	t.Helper()
	return ts.send(t, method, path, strings.NewReader(body))
}

// newEngineServer serves the embedded model on the CPU from a server built here, so that a test
// can hold its queue as a long generation would.
func newEngineServer(t *testing.T) (*server, testServer) {
	t.Helper()
	e, err := engine.Load(context.Background(), engine.LoadOptions{Backend: engine.BackendCPU, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{token: "test-token", load: engineLoad, state: "ready", model: e}
	hs := httptest.NewServer(s.routes())
	t.Cleanup(func() { hs.Close(); e.Close() })
	return s, testServer{base: hs.URL, token: "test-token"}
}

// holdQueue takes the generation queue, as a running generation does, until the test ends.
func holdQueue(t *testing.T, s *server) {
	t.Helper()
	if err := s.queue.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.queue.release)
}

// allocatedBy runs f and returns the bytes the process allocated meanwhile.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A 50 MB prompt is refused from its size alone: a 400 with the numbers within a second,
// allocating far less than the prompt, without waiting for the generation in progress.
func TestFiftyMBPromptIsA400WithinASecond(t *testing.T) {
	s, ts := newEngineServer(t)
	holdQueue(t, s)
	ctxLen := s.model.Info().Context
	huge := strings.Repeat("Once upon a time there was a fox. ", 50<<20/34)
	chat, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": huge}}})
	completion, _ := json.Marshal(map[string]any{"prompt": huge})
	cases := []struct {
		name, route string
		body        []byte
		chunked     bool // no Content-Length: the bound is found while reading
	}{
		{"chat", "/v1/chat/completions", chat, false},
		{"completion", "/v1/completions", completion, false},
		{"chat sent chunked", "/v1/chat/completions", chat, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(c.body)
			if c.chunked {
				r = struct{ io.Reader }{r}
			}
			var code int
			var body string
			var took time.Duration
			alloc := allocatedBy(func() { code, body, took = ts.send(t, "POST", c.route, r) })
			if code != http.StatusBadRequest || !strings.Contains(body, fmt.Sprintf("context of %d tokens", ctxLen)) || !strings.Contains(body, "bytes") {
				t.Fatalf("%d %s; want 400 with the context and the bytes", code, body[:min(len(body), 300)])
			}
			t.Logf("%v: %s", took, body)
			if took > time.Second {
				t.Errorf("answered after %v, want under 1s", took)
			}
			if alloc > 100<<20 {
				t.Errorf("the server allocated %d MB for a refused prompt", alloc>>20)
			}
		})
	}
}

// A prompt small enough in bytes to be tokenized but over the context in tokens is a 400 with
// its token count, found before the request's turn.
func TestPromptOverTheContextIsA400BeforeItsTurn(t *testing.T) {
	s, ts := newEngineServer(t)
	holdQueue(t, s)
	ctxLen := s.model.Info().Context
	content := strings.Repeat("a b ", ctxLen+ctxLen/2)
	body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": content}}})
	code, resp, took := ts.sendString(t, "POST", "/v1/chat/completions", string(body))
	want := fmt.Sprintf("at least %d tokens but the context holds %d", ctxLen+1, ctxLen)
	if code != http.StatusBadRequest || !strings.Contains(resp, want) {
		t.Fatalf("%d %s; want 400 saying %q", code, resp, want)
	}
	if took > time.Second {
		t.Errorf("answered after %v while another request held the queue", took)
	}
}

// A body is one JSON object: anything after it but whitespace is a 400 on every route.
func TestTrailingDataAfterTheJSONBodyIsA400(t *testing.T) {
	load, _ := newFakeLoader(time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load})
	chat := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`
	cases := []struct{ name, route, body string }{
		{"chat and a word", "/v1/chat/completions", chat + ` garbage`},
		{"two chats", "/v1/chat/completions", chat + chat},
		{"chat and a bracket", "/v1/chat/completions", chat + `]`},
		{"completion and a number", "/v1/completions", `{"prompt":"hi","max_tokens":1} 1`},
		{"two loads", "/vkllm/load", `{"path":""} {"path":"other.gguf"}`},
		{"plan and a letter", "/vkllm/plan", `{} x`},
		{"bench and a letter", "/vkllm/bench", `{"n_prompt":8} x`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body, _ := ts.sendString(t, "POST", c.route, c.body)
			if code != http.StatusBadRequest || !strings.Contains(body, "more after its JSON object") {
				t.Fatalf("%d %s; want 400 about data after the object", code, body)
			}
		})
	}
	if code, body, _ := ts.sendString(t, "POST", "/v1/chat/completions", chat+" \n\t "); code != http.StatusOK {
		t.Fatalf("trailing whitespace: %d %s, want 200", code, body)
	}
}

// Out-of-range settings are a 400 whose message starts with the field's name.
func TestOutOfRangeFieldsAreA400NamingTheField(t *testing.T) {
	load, _ := newFakeLoader(time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load})
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct{ route, body, field string }{
		{"/v1/chat/completions", `{` + msgs + `,"temperature":-1}`, "temperature"},
		{"/v1/chat/completions", `{` + msgs + `,"repeat_last_n":-3}`, "repeat_last_n"},
		{"/v1/chat/completions", `{` + msgs + `,"top_k":-1}`, "top_k"},
		{"/v1/chat/completions", `{` + msgs + `,"top_p":2}`, "top_p"},
		{"/v1/chat/completions", `{` + msgs + `,"max_tokens":-1}`, "max_tokens"},
		{"/v1/completions", `{"prompt":"hi","repeat_penalty":-1}`, "repeat_penalty"},
		{"/vkllm/plan", `{"device":-2}`, "device"},
		{"/vkllm/plan", `{"ctx":-1}`, "ctx"},
		{"/vkllm/plan", `{"vram_mb":-5}`, "vram_mb"},
		{"/vkllm/bench", `{"n_prompt":-1}`, "n_prompt"},
		{"/vkllm/bench", `{"n_gen":-1}`, "n_gen"},
		{"/vkllm/bench", `{"reps":-2}`, "reps"},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			code, body, _ := ts.sendString(t, "POST", c.route, c.body)
			var e apiError
			json.Unmarshal([]byte(body), &e)
			if code != http.StatusBadRequest || !strings.HasPrefix(e.Error.Message, c.field+" ") {
				t.Fatalf("%s %s: %d %s; want 400 naming %s", c.route, c.body, code, body, c.field)
			}
		})
	}
}

// A bench test longer than the context is a 400 with the numbers before anything is queued or
// allocated (a billion-token test used to build its 8 GB synthetic prompt first).
func TestBenchCountsPastTheContextAreA400BeforeAnything(t *testing.T) {
	s, ts := newEngineServer(t)
	holdQueue(t, s)
	ctxLen := s.model.Info().Context
	for _, field := range []string{"n_prompt", "n_gen"} {
		t.Run(field, func(t *testing.T) {
			var code int
			var body string
			var took time.Duration
			alloc := allocatedBy(func() {
				code, body, took = ts.sendString(t, "POST", "/vkllm/bench", `{"`+field+`":1000000000}`)
			})
			want := fmt.Sprintf("needs 1000000000 positions of context (0 already in the cache + 1000000000 tested), but the context holds %d", ctxLen)
			if code != http.StatusBadRequest || !strings.Contains(body, want) {
				t.Fatalf("%d %s; want 400 saying %q", code, body, want)
			}
			if took > time.Second || alloc > 100<<20 {
				t.Errorf("answered after %v, allocating %d MB", took, alloc>>20)
			}
		})
	}
}

// A model file with a recursive chat template (which used to overflow the sidecar's stack on
// every message, and again after each restart) answers the chat in the plain format, and the
// server stays up for the next one.
func TestRecursiveChatTemplateAnswersAndTheServerStaysUp(t *testing.T) {
	spec := modeltest.Small("qwen2", quant.Q8_0, 3)
	spec.ChatTemplate = `{% macro f(m) %}{{ f(m) }}{% endmacro %}{% for m in messages %}{{ f(m) }}{% endfor %}`
	path := filepath.Join(t.TempDir(), "hostile.gguf")
	if err := modeltest.WriteFile(path, spec); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, ServeOptions{Load: engineLoad, Backend: "cpu", ModelPath: path})
	chat := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"temperature":0}`
	for i := range 2 {
		code, body, took := ts.sendString(t, "POST", "/v1/chat/completions", chat)
		if code != http.StatusOK || !strings.Contains(body, `"prompt_tokens"`) {
			t.Fatalf("chat %d: %d %s", i+1, code, body)
		}
		if took > 2*time.Second {
			t.Errorf("chat %d took %v, want under 2s", i+1, took)
		}
	}
	var h Health
	if code := ts.do(t, "GET", "/vkllm/health", "", &h); code != http.StatusOK || h.Status != "ready" || h.Model == nil || h.Model.Path != path {
		t.Fatalf("health after the chats: %d %+v", code, h)
	}
}
