package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
)

// WebServer is browser mode: it serves the built frontend and binds the same services the window
// binds, as POST /api/<Service>/<Method> with a JSON array of arguments (the reply is
// {"result": ...} or {"error": "..."}), and pushes the emitter's events as server-sent events on
// GET /api/events. It is the transport the frontend uses when it is not inside Wails.
type WebServer struct {
	assets   fs.FS
	services map[string]reflect.Value
	hub      *EventHub
	mux      *http.ServeMux
}

// NewWebServer serves assets (the root of the built frontend) and the given services, keyed by the
// name the frontend calls them with ("ChatService", ...). Events reach browsers through hub.
func NewWebServer(assets fs.FS, hub *EventHub, services map[string]any) *WebServer {
	w := &WebServer{assets: assets, services: map[string]reflect.Value{}, hub: hub, mux: http.NewServeMux()}
	for name, svc := range services {
		w.services[name] = reflect.ValueOf(svc)
	}
	w.mux.HandleFunc("GET /api/events", w.events)
	w.mux.HandleFunc("POST /api/{service}/{method}", w.call)
	w.mux.Handle("GET /", http.FileServerFS(assets))
	return w
}

// ServeHTTP implements http.Handler.
func (w *WebServer) ServeHTTP(rw http.ResponseWriter, r *http.Request) { w.mux.ServeHTTP(rw, r) }

// Serve answers on ln until ctx ends.
func (w *WebServer) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: w, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		w.hub.closeAll()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve the UI on %s: %w", ln.Addr(), err)
	}
	return nil
}

// sameOrigin refuses requests a web page on another origin makes on the user's behalf: the API
// has no token, so only pages this server served may call it.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser cross-origin request (curl, tests, same-origin GET)
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

func (w *WebServer) call(rw http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeJSON(rw, http.StatusForbidden, map[string]string{"error": "cross-origin calls are refused; open the UI from the address vkllm printed"})
		return
	}
	svcName, methodName := r.PathValue("service"), r.PathValue("method")
	svc, ok := w.services[svcName]
	if !ok {
		writeJSON(rw, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no service %q", svcName)})
		return
	}
	m := svc.MethodByName(methodName)
	if !m.IsValid() {
		writeJSON(rw, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("service %s has no method %q", svcName, methodName)})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		writeJSON(rw, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("read request body: %v", err)})
		return
	}
	args, err := decodeArgs(m.Type(), body)
	if err != nil {
		writeJSON(rw, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("%s.%s: %v", svcName, methodName, err)})
		return
	}
	out := m.Call(args)
	result, callErr := splitResults(out)
	if callErr != nil {
		writeJSON(rw, http.StatusOK, map[string]any{"error": callErr.Error(), "result": result})
		return
	}
	writeJSON(rw, http.StatusOK, map[string]any{"result": result})
}

// decodeArgs turns a JSON array into the method's arguments, one element per parameter.
func decodeArgs(t reflect.Type, body []byte) ([]reflect.Value, error) {
	var raw []json.RawMessage
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &raw); err != nil {
			return nil, fmt.Errorf("arguments must be a JSON array: %w", err)
		}
	}
	if len(raw) != t.NumIn() {
		return nil, fmt.Errorf("takes %d arguments, got %d", t.NumIn(), len(raw))
	}
	args := make([]reflect.Value, len(raw))
	for i, r := range raw {
		p := reflect.New(t.In(i))
		if err := json.Unmarshal(r, p.Interface()); err != nil {
			return nil, fmt.Errorf("argument %d: want %s: %w", i+1, t.In(i), err)
		}
		args[i] = p.Elem()
	}
	return args, nil
}

var errorType = reflect.TypeFor[error]()

// splitResults takes Wails' convention: (), (T), (error) or (T, error).
func splitResults(out []reflect.Value) (any, error) {
	var result any
	var err error
	for _, v := range out {
		if v.Type() == errorType {
			if !v.IsNil() {
				err = v.Interface().(error)
			}
			continue
		}
		result = v.Interface()
	}
	return result, err
}

func writeJSON(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	if err := json.NewEncoder(rw).Encode(v); err != nil {
		slog.Debug("write JSON reply", "err", err)
	}
}

func (w *WebServer) events(rw http.ResponseWriter, r *http.Request) {
	flusher, ok := rw.(http.Flusher)
	if !ok {
		http.Error(rw, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	// Subscribe before answering, so every event after the client sees the stream open reaches it.
	ch, cancel := w.hub.subscribe()
	defer cancel()
	rw.Header().Set("Content-Type", "text/event-stream")
	rw.Header().Set("Cache-Control", "no-cache")
	rw.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(rw, ": connected\n\n")
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			if _, err := rw.Write(msg); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// EventHub is the Emitter of browser mode: it fans every event out to the connected browsers as
// server-sent events named after the event ("event: chat:delta").
type EventHub struct {
	mu   sync.Mutex
	subs map[chan []byte]struct{}
}

// NewEventHub returns a hub with no subscribers.
func NewEventHub() *EventHub { return &EventHub{subs: map[chan []byte]struct{}{}} }

// Emit sends one event to every subscriber. A browser that falls 256 events behind loses events
// rather than stalling generation.
func (h *EventHub) Emit(name string, payload any) {
	data, err := json.Marshal(payload)
	if err != nil {
		slog.Error("encode event", "event", name, "err", err)
		return
	}
	msg := []byte("event: " + name + "\ndata: " + string(data) + "\n\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- msg:
		default:
			slog.Warn("browser too slow for events; dropping one", "event", name)
		}
	}
}

func (h *EventHub) subscribe() (<-chan []byte, func()) {
	ch := make(chan []byte, 256)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
		h.mu.Unlock()
	}
}

func (h *EventHub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}
