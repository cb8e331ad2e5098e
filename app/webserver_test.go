package app

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/vkllm/vkllm/engine"
)

func newTestServer(t *testing.T) (*httptest.Server, *fakeEngine, *memStore) {
	t.Helper()
	eng := &fakeEngine{pieces: []string{"Once", " upon", " a", " time"}, pause: 2 * time.Millisecond, model: engine.ModelInfo{Name: "stories260K.gguf"}}
	st := newMemStore()
	hub := NewEventHub()
	ctx := context.Background()
	assets := fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>vkllm</title>")}}
	ws := NewWebServer(assets, hub, map[string]any{
		"ChatService":  NewChatService(ctx, eng, st, hub),
		"ModelService": NewModelService(ctx, eng, hub),
		"PinService":   NewPinService(ctx, st, nil),
	})
	srv := httptest.NewServer(ws)
	t.Cleanup(func() { hub.closeAll(); srv.Close() })
	return srv, eng, st
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

func post(t *testing.T, url, body string, header map[string]string) (int, reply) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var r reply
	_ = json.NewDecoder(resp.Body).Decode(&r)
	return resp.StatusCode, r
}

func TestWebServerCallsServiceMethodsWithJSONArguments(t *testing.T) {
	srv, _, _ := newTestServer(t)
	code, r := post(t, srv.URL+"/api/ChatService/CreateConversation", `["Stories"]`, nil)
	if code != 200 || r.Error != "" {
		t.Fatalf("CreateConversation: %d %q", code, r.Error)
	}
	var c Conversation
	if err := json.Unmarshal(r.Result, &c); err != nil || c.Title != "Stories" || c.ID == 0 {
		t.Fatalf("result %s, want a conversation titled Stories", r.Result)
	}
	_, r = post(t, srv.URL+"/api/ChatService/ListConversations", `[]`, nil)
	var list []Conversation
	if err := json.Unmarshal(r.Result, &list); err != nil || len(list) != 1 {
		t.Fatalf("ListConversations = %s, want one conversation", r.Result)
	}
}

func TestWebServerReportsBadCalls(t *testing.T) {
	srv, _, _ := newTestServer(t)
	cases := []struct {
		name, path, body string
		header           map[string]string
		wantCode         int
		wantErr          string
	}{
		{"unknown service", "/api/Nope/List", `[]`, nil, 404, `no service "Nope"`},
		{"unknown method", "/api/ChatService/Nope", `[]`, nil, 404, `no method "Nope"`},
		{"wrong argument count", "/api/ChatService/Messages", `[]`, nil, 400, "takes 1 arguments, got 0"},
		{"wrong argument type", "/api/ChatService/Messages", `["x"]`, nil, 400, "argument 1: want int64"},
		{"not an array", "/api/ChatService/Messages", `{"id":1}`, nil, 400, "must be a JSON array"},
		{"cross-origin page", "/api/ChatService/ListConversations", `[]`, map[string]string{"Origin": "http://evil.example"}, 403, "cross-origin"},
		{"method error", "/api/PinService/Set", `["", 10]`, nil, 200, "no device key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, r := post(t, srv.URL+c.path, c.body, c.header)
			if code != c.wantCode || !strings.Contains(r.Error, c.wantErr) {
				t.Fatalf("got %d %q, want %d with %q", code, r.Error, c.wantCode, c.wantErr)
			}
		})
	}
}

func TestWebServerServesTheFrontend(t *testing.T) {
	srv, _, _ := newTestServer(t)
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Scan()
	if resp.StatusCode != 200 || !strings.Contains(sc.Text(), "<title>vkllm</title>") {
		t.Fatalf("GET / = %d %q, want the index page", resp.StatusCode, sc.Text())
	}
}

func TestWebServerStreamsChatEventsOverSSE(t *testing.T) {
	srv, _, _ := newTestServer(t)
	resp, err := http.Get(srv.URL + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Scan() // ": connected"

	done := make(chan reply, 1)
	go func() {
		_, r := post(t, srv.URL+"/api/ChatService/Send", `[0, "Tell me a story"]`, nil)
		done <- r
	}()
	var streamed strings.Builder
	var names []string
	deadline := time.After(20 * time.Second)
	for {
		lines := make(chan string)
		go func() {
			if sc.Scan() {
				lines <- sc.Text()
			} else {
				close(lines)
			}
		}()
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("event stream ended early")
			}
			line = l
		case <-deadline:
			t.Fatalf("no finished event within 20 s; saw %v", names)
		}
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, name)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && names[len(names)-1] == EventDelta {
			var d ChatDelta
			if err := json.Unmarshal([]byte(data), &d); err != nil {
				t.Fatal(err)
			}
			streamed.WriteString(d.Text)
		}
		if strings.Contains(line, `"kind":"finished"`) {
			break
		}
	}
	r := <-done
	var m Message
	if err := json.Unmarshal(r.Result, &m); err != nil || r.Error != "" {
		t.Fatalf("Send reply %s / %q", r.Result, r.Error)
	}
	if streamed.String() != "Once upon a time" || m.Content != streamed.String() {
		t.Fatalf("streamed %q, saved %q; want both %q", streamed.String(), m.Content, "Once upon a time")
	}
	if names[0] != EventChat {
		t.Fatalf("first event %q, want %q", names[0], EventChat)
	}
}
