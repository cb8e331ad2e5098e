package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
)

// fuzzModel answers at once: at most four pieces per generation (whatever max_tokens asks), a
// prompt count of one token per four bytes, and a prompt bound, so every route of the server
// runs to its end on any request.
type fuzzModel struct{ path string }

func (m *fuzzModel) Info() engine.ModelInfo {
	return engine.ModelInfo{Name: "fuzz.gguf", Path: m.path, Arch: "llama", Backend: "cpu", Placement: "cpu", Context: 64, VocabSize: 32}
}
func (m *fuzzModel) Close() error          { return nil }
func (m *fuzzModel) MaxPromptBytes() int64 { return 64 * 16 }
func (m *fuzzModel) PromptTokens(ctx context.Context, req engine.GenerateRequest) ([]int, error) {
	n := len(req.Prompt)
	for _, msg := range req.Messages {
		n += len(msg.Content) + len(msg.Role)
	}
	if n/4 > 64 {
		return nil, &engine.PromptTooLongError{Bytes: n, Tokens: n / 4, Context: 64}
	}
	return make([]int, n/4), nil
}
func (m *fuzzModel) Generate(ctx context.Context, req engine.GenerateRequest, onPiece func(engine.Piece) error) (engine.Result, error) {
	res := engine.Result{Stop: engine.StopEOS}
	n := 4
	if req.MaxTokens > 0 && req.MaxTokens < n {
		n, res.Stop = req.MaxTokens, engine.StopLength
	}
	for i := 0; i < n; i++ {
		if err := onPiece(engine.Piece{ID: i, Text: " word"}); err != nil {
			return res, err
		}
		res.Text += " word"
		res.Generated = append(res.Generated, i)
	}
	return res, nil
}

// fuzzRoutes are the POST routes whose bodies the fuzzer writes; /vkllm/plan is decoded and
// checked separately (planning opens the named file and the Vulkan loader).
var fuzzRoutes = []string{"/v1/chat/completions", "/v1/completions", "/vkllm/tokenize", "/vkllm/bench", "/vkllm/load"}

// answerCodes are the statuses a request may get from the fuzz model's server: success, the
// caller's mistake, a refused load, a model that cannot do it. Never a 500, never a panic.
var answerCodes = map[int]bool{http.StatusOK: true, http.StatusBadRequest: true, http.StatusUnprocessableEntity: true,
	http.StatusNotImplemented: true, http.StatusServiceUnavailable: true}

// FuzzRequestBodies sends arbitrary bodies to every JSON route of the sidecar: each answer is a
// status from answerCodes with a JSON error body or a well-formed reply (JSON, or an SSE stream of
// JSON events), a body that is not exactly one JSON value is a 400, and no handler panics.
func FuzzRequestBodies(f *testing.F) {
	seeds := []struct {
		route uint8
		body  string
	}{
		{0, `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":3}`},
		{0, `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url"}]}],"stream":true}`},
		{0, `{"messages":[{"role":"developer","content":null}],"temperature":-1,"top_p":2,"stop":["a",""]}`},
		{0, `{"messages":[{"role":"tool","content":"x"}],"n":2}`},
		{0, `{"messages":[],"max_completion_tokens":-5}`},
		{0, `{"messages":[{"role":"user","content":"x"}]} trailing`},
		{1, `{"prompt":"Once","stream":true,"stop":"e","repeat_last_n":-3}`},
		{1, `{"prompt":["a","b"],"seed":-1,"top_k":1e3}`},
		{1, `{"prompt":null,"max_tokens":1e100}`},
		{2, `{"messages":[{"role":"user","content":"` + strings.Repeat("long ", 100) + `"}]}`},
		{3, `{"n_prompt":1000000000,"n_gen":-1,"reps":0}`},
		{3, `{"n_prompt":8,"n_gen":4,"reps":1,"seed":18446744073709551615}`},
		{4, `{"path":"x.broken"}`},
		{4, `{"path":""}`},
		{0, `null`},
		{1, `[1,2,3]`},
		{0, "\xff\xfe{"},
	}
	for _, s := range seeds {
		f.Add(s.route, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		load := func(ctx context.Context, opts engine.LoadOptions) (Model, error) {
			if strings.Contains(opts.Path, "broken") {
				return nil, errors.New("open " + opts.Path + ": not a GGUF file")
			}
			return &fuzzModel{path: opts.Path}, nil
		}
		s := &server{token: "fuzz", load: load, state: "ready", model: &fuzzModel{}}
		h := s.routes()
		path := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer fuzz")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code, out := rec.Code, rec.Body.Bytes()
		if !answerCodes[code] {
			t.Fatalf("POST %s %q: status %d: %s", path, body, code, out)
		}
		if !json.Valid(body) && code != http.StatusBadRequest {
			t.Fatalf("POST %s with a body that is not JSON (%q): status %d, want 400: %s", path, body, code, out)
		}
		if code != http.StatusOK {
			var e apiError
			if err := json.Unmarshal(out, &e); err != nil || e.Error.Message == "" {
				t.Fatalf("POST %s %q: status %d with a body that is not an error object: %q", path, body, code, out)
			}
			return
		}
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				line, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok || line == "[DONE]" {
					continue
				}
				if !json.Valid([]byte(line)) {
					t.Fatalf("POST %s %q: SSE event that is not JSON: %q", path, body, line)
				}
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("POST %s %q: 200 with a body that is not JSON: %q", path, body, out)
		}
	})
}

// FuzzPlanRequestDecoding decodes arbitrary /vkllm/plan bodies: a body that is not one JSON
// object is refused, and a request that passes the check has no negative field.
func FuzzPlanRequestDecoding(f *testing.F) {
	for _, b := range []string{`{"model":"a.gguf","ctx":4096,"vram_mb":300,"device":0}`, `{"ctx":-1}`, `{"device":-2}`,
		`{"vram_mb":1e400}`, `{"ctx_strict":"yes"}`, `{} {}`, `[]`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/vkllm/plan", bytes.NewReader(body))
		var req PlanRequest
		err := decodeBody(r, &req)
		if err != nil {
			if !strings.Contains(err.Error(), "request body") {
				t.Fatalf("decode error %q does not say it is about the request body", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("decoded a body that is not JSON: %q", body)
		}
		if req.check() == nil && (req.Ctx < 0 || req.VRAMMB < 0 || (req.Device != nil && *req.Device < 0)) {
			t.Fatalf("check passed %+v", req)
		}
	})
}
