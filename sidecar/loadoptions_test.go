package sidecar

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
)

// optionsLoader records the engine options of every load.
type optionsLoader struct {
	mu   sync.Mutex
	seen []engine.LoadOptions
	fail string // a path whose load fails
}

func (l *optionsLoader) load(_ context.Context, opts engine.LoadOptions) (Model, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, opts)
	if opts.Path == l.fail && l.fail != "" {
		return nil, context.DeadlineExceeded
	}
	return &fakeModel{name: opts.Path}, nil
}

func (l *optionsLoader) last() engine.LoadOptions {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[len(l.seen)-1]
}

func TestLoadRequestOptionsReachTheEngineAndMissingOnesTakeTheServeFlags(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		ctx     int
		backend engine.Backend
		device  int
		kv      string
		refuse  string // a 400 containing this
	}{
		{name: "path only: the serve flags", body: `{"path":"/m/a.gguf"}`, ctx: 256, backend: engine.BackendAuto, device: -1},
		{name: "every option", body: `{"path":"/m/a.gguf","ctx":1024,"backend":"cpu","device":1,"kv":"f32"}`, ctx: 1024, backend: engine.BackendCPU, device: 1, kv: "f32"},
		{name: "a device only", body: `{"path":"/m/a.gguf","device":0}`, ctx: 256, backend: engine.BackendAuto, device: 0},
		{name: "negative context", body: `{"path":"/m/a.gguf","ctx":-5}`, refuse: "ctx -5 is negative"},
		{name: "unknown backend", body: `{"path":"/m/a.gguf","backend":"tpu"}`, refuse: `is unknown: want auto, gpu or cpu`},
		{name: "negative device", body: `{"path":"/m/a.gguf","device":-2}`, refuse: "device -2 is negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := &optionsLoader{}
			ts := startServer(t, ServeOptions{Load: l.load, Context: 256, Backend: engine.BackendAuto})
			code, body := ts.post(t, "/vkllm/load", c.body)
			if c.refuse != "" {
				if code != 400 || !strings.Contains(body, c.refuse) {
					t.Fatalf("load %s: %d %s, want 400 saying %q", c.body, code, body, c.refuse)
				}
				return
			}
			if code != 200 {
				t.Fatalf("load %s: %d %s", c.body, code, body)
			}
			got := l.last()
			if got.Context != c.ctx || got.Backend != c.backend || got.DeviceIndex != c.device || got.KV != c.kv {
				t.Errorf("engine options ctx %d backend %s device %d kv %q, want %d %s %d %q", got.Context, got.Backend, got.DeviceIndex, got.KV, c.ctx, c.backend, c.device, c.kv)
			}
		})
	}
}

func TestAFailedLoadReloadsThePreviousModelWithItsOwnOptions(t *testing.T) {
	l := &optionsLoader{fail: "/m/bad.gguf"}
	ts := startServer(t, ServeOptions{Load: l.load})
	var out map[string]any
	if code := ts.do(t, "POST", "/vkllm/load", `{"path":"/m/good.gguf","ctx":512,"backend":"cpu","kv":"f32"}`, &out); code != 200 {
		t.Fatalf("load good: %d %v", code, out)
	}
	if code := ts.do(t, "POST", "/vkllm/load", `{"path":"/m/bad.gguf","ctx":4096}`, &out); code != 422 {
		t.Fatalf("load bad: %d %v, want 422", code, out)
	}
	got := l.last()
	if got.Path != "/m/good.gguf" || got.Context != 512 || got.Backend != engine.BackendCPU || got.KV != "f32" {
		t.Fatalf("the restore loaded %+v, want /m/good.gguf at ctx 512 on the CPU with an f32 cache", got)
	}
}

// post sends body and returns the status and the response body.
func (ts testServer) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+ts.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSupervisorRestoresTheLoadOptionsAfterARestart(t *testing.T) {
	var log eventLog
	s := startChild(t, &log, "--delay", "1ms")
	ctx := context.Background()
	cases := []struct {
		name string
		load func() (engine.ModelInfo, error)
		want int // the context after the restart
	}{
		{"loaded with a context of 128", func() (engine.ModelInfo, error) {
			return s.LoadModelWith(ctx, LoadRequest{Path: "/models/chosen.gguf", Ctx: 128, Backend: "cpu"})
		}, 128},
		{"loaded again without options", func() (engine.ModelInfo, error) { return s.LoadModel(ctx, "/models/chosen.gguf") }, 256},
	}
	for _, c := range cases {
		if _, err := c.load(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		restarts := countKind(&log, EventRestarted)
		syscall.Kill(s.PID(), syscall.SIGKILL)
		waitKinds(t, &log, EventRestarted, restarts+1)
		info, err := s.Model(ctx)
		if err != nil || info.Name != "/models/chosen.gguf" || info.Context != c.want {
			t.Errorf("%s: after the restart %+v, %v; want /models/chosen.gguf at context %d", c.name, info, err, c.want)
		}
	}
	if _, err := s.LoadModelWith(ctx, LoadRequest{Path: "/m.gguf", Backend: "tpu"}); err == nil || !strings.Contains(err.Error(), `backend "tpu" is unknown`) {
		t.Errorf("an unknown backend: %v, want it refused before the engine is asked", err)
	}
}

func countKind(l *eventLog, kind string) int {
	n := 0
	for _, k := range l.kinds() {
		if k == kind {
			n++
		}
	}
	return n
}

func waitKinds(t *testing.T, l *eventLog, kind string, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for countKind(l, kind) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no %d %s events within 15 s; got %v", n, kind, l.kinds())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
