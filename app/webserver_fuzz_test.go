package app

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/store"
)

// webCallCodes are the statuses of POST /api/<Service>/<Method>: a reply (the method's result or
// its error), a request that does not fit the method, an unknown service or method, another
// origin. Never a 500, never a panic.
var webCallCodes = map[int]bool{http.StatusOK: true, http.StatusBadRequest: true, http.StatusNotFound: true, http.StatusForbidden: true}

// FuzzWebBindingCalls calls every method of the bound services (and names that are none) with
// arbitrary bodies through the browser-mode binding: each answer is a status of webCallCodes
// with a JSON object holding "result" or "error", a body that is not a JSON array is a 400
// naming the method, and nothing panics.
func FuzzWebBindingCalls(f *testing.F) {
	for _, s := range []struct {
		svc    uint8
		method uint8
		name   string
		body   string
	}{
		{0, 0, "", `["Stories"]`},
		{0, 1, "", `[1, "hello"]`},
		{0, 2, "", `[-1, "truncate-middle"]`},
		{0, 3, "", `[9223372036854775807]`},
		{0, 4, "", `[{"temperature": -1, "max_tokens": 1e9}]`},
		{1, 0, "", `["/no/such/model.gguf"]`},
		{2, 1, "", `["", -5]`},
		{3, 0, "", `[{"n_prompt": -1, "n_gen": 1000000000, "reps": -3}]`},
		{3, 1, "", `["/dev/null"]`},
		{0, 255, "Nope", `[]`},
		{0, 0, "", `{"id": 1}`},
		{0, 0, "", `[null, null, null]`},
		{1, 2, "", "\xff["},
	} {
		f.Add(s.svc, s.method, s.name, []byte(s.body), false)
	}
	f.Add(uint8(0), uint8(0), "", []byte(`[]`), true)

	ctx := context.Background()
	eng := &fakeEngine{pieces: []string{"Once", " upon"}, model: engine.ModelInfo{Name: "fuzz.gguf"}}
	st := newMemStore()
	hub := NewEventHub()
	benchStore, err := store.Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { benchStore.Close() })
	services := map[string]any{
		"ChatService":  NewChatService(ctx, eng, st, hub),
		"ModelService": NewModelService(ctx, eng, hub),
		"PinService":   NewPinService(ctx, st, nil),
		"BenchService": NewBenchService(ctx, &fakeBenchEngine{}, benchStore, hub),
	}
	names := []string{"ChatService", "ModelService", "PinService", "BenchService"}
	ws := NewWebServer(fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}}, hub, services)

	f.Fuzz(func(t *testing.T, svc, method uint8, name string, body []byte, crossOrigin bool) {
		svcName := names[int(svc)%len(names)]
		typ := reflect.TypeOf(services[svcName])
		methodName := name
		if method != 255 || name == "" {
			methodName = typ.Method(int(method) % typ.NumMethod()).Name
		}
		if methodName == "" || methodName == "." || methodName == ".." {
			return // the mux cleans these out of the path before any handler sees them
		}
		req := httptest.NewRequest(http.MethodPost, "/api/"+svcName+"/"+url.PathEscape(methodName), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if crossOrigin {
			req.Header.Set("Origin", "http://evil.example")
		}
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			ws.ServeHTTP(rec, req)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s.%s(%q) did not answer within 10 s", svcName, methodName, body)
		}
		if !webCallCodes[rec.Code] {
			t.Fatalf("%s.%s(%q): status %d: %s", svcName, methodName, body, rec.Code, rec.Body.Bytes())
		}
		var reply map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &reply); err != nil {
			t.Fatalf("%s.%s(%q): reply %q is not a JSON object", svcName, methodName, body, rec.Body.Bytes())
		}
		_, hasResult := reply["result"]
		_, hasError := reply["error"]
		if !hasResult && !hasError {
			t.Fatalf("%s.%s(%q): reply %q has neither result nor error", svcName, methodName, body, rec.Body.Bytes())
		}
		if crossOrigin && rec.Code != http.StatusForbidden {
			t.Fatalf("a cross-origin call of %s.%s got %d", svcName, methodName, rec.Code)
		}
		var arr []json.RawMessage
		if !crossOrigin && rec.Code != http.StatusNotFound && len(bytes.TrimSpace(body)) > 0 && json.Unmarshal(body, &arr) != nil {
			if rec.Code != http.StatusBadRequest || !strings.Contains(string(reply["error"]), methodName) {
				t.Fatalf("%s.%s with a body that is not a JSON array (%q): %d %s", svcName, methodName, body, rec.Code, rec.Body.Bytes())
			}
		}
	})
}
