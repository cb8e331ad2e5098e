package sidecar

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
)

// trackingLoader is the fake loader that also fails for paths it is told to, and remembers every
// model it made so a test can see which were closed.
type trackingLoader struct {
	mu     sync.Mutex
	fail   map[string]bool
	models []*fakeModel
}

func (l *trackingLoader) load(ctx context.Context, opts engine.LoadOptions) (Model, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail[opts.Path] || strings.HasSuffix(opts.Path, ".broken") {
		return nil, errors.New("upload tensor blk.0.attn_q.weight: out of device memory")
	}
	name := opts.Path
	if name == "" {
		name = "fake.gguf"
	}
	m := &fakeModel{name: name, delay: time.Millisecond}
	l.models = append(l.models, m)
	return m, nil
}

func (l *trackingLoader) setFail(path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail[path] = true
}

// loadBody posts a load and returns its status and body.
func (ts testServer) loadBody(t *testing.T, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.base+"/vkllm/load", strings.NewReader(`{"path":"`+path+`"}`))
	req.Header.Set("Authorization", "Bearer "+ts.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestFailedLoadKeepsTheWorkingModelServing(t *testing.T) {
	for _, tc := range []struct {
		name       string
		check      func(string) error
		failOld    bool   // the previous model cannot be loaded again either
		wantErr    string // in the load error
		wantModel  string // GET /vkllm/model afterwards; "" = none (404)
		wantClosed bool   // the previous model object was closed (reloaded rather than kept)
	}{
		{name: "preflight refuses the file", check: func(p string) error {
			if strings.HasSuffix(p, ".broken") {
				return errors.New("open " + p + ": not a GGUF file")
			}
			return nil
		}, wantErr: "not a GGUF file; /models/good.gguf keeps serving", wantModel: "/models/good.gguf"},
		{name: "load fails after the preflight", wantErr: "out of device memory; /models/good.gguf keeps serving",
			wantModel: "/models/good.gguf", wantClosed: true},
		{name: "previous model cannot be reloaded", failOld: true, wantErr: "failed too (upload tensor blk.0.attn_q.weight: out of device memory), so none is loaded",
			wantClosed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &trackingLoader{fail: map[string]bool{}}
			ts := startServer(t, ServeOptions{Load: l.load, Check: tc.check})
			if code, body := ts.loadBody(t, "/models/good.gguf"); code != 200 {
				t.Fatalf("load good: %d %s", code, body)
			}
			if tc.failOld {
				l.setFail("/models/good.gguf")
			}
			code, body := ts.loadBody(t, "/models/new.broken")
			if code != http.StatusUnprocessableEntity || !strings.Contains(body, tc.wantErr) {
				t.Fatalf("failed load: %d %s, want 422 containing %q", code, body, tc.wantErr)
			}
			var info engine.ModelInfo
			mcode := ts.do(t, "GET", "/vkllm/model", "", &info)
			var h Health
			ts.do(t, "GET", "/vkllm/health", "", &h)
			var out chatResponse
			ccode := ts.do(t, "POST", "/v1/chat/completions", `{"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, &out)
			if tc.wantModel == "" {
				if mcode != 404 || ccode != 503 || h.Status != "error" {
					t.Fatalf("after both loads failed: model %d, chat %d, health %+v; want 404, 503, error", mcode, ccode, h)
				}
				return
			}
			if mcode != 200 || info.Name != tc.wantModel {
				t.Fatalf("model after the failed load: %d %+v, want %s", mcode, info, tc.wantModel)
			}
			if ccode != 200 || out.Choices[0].Message.Content != fakeText(2) {
				t.Fatalf("chat after the failed load: %d %+v, want the old model answering", ccode, out)
			}
			if h.Status != "ready" || h.Model == nil || h.Model.Name != tc.wantModel || h.LoadError == "" {
				t.Fatalf("health after the failed load: %+v, want ready with %s and the load error", h, tc.wantModel)
			}
			l.mu.Lock()
			first := l.models[1] // [0] is the start-up model, [1] /models/good.gguf
			l.mu.Unlock()
			first.mu.Lock()
			closed := first.closed
			first.mu.Unlock()
			if closed != tc.wantClosed {
				t.Errorf("previous model closed = %v, want %v", closed, tc.wantClosed)
			}
		})
	}
}
