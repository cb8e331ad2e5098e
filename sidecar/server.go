// Package sidecar runs the engine in its own process (`vkllm serve`) behind an authenticated,
// OpenAI-compatible HTTP API, and supervises that process for the app: start, health, restart on
// crash with backoff, and streaming chat that survives the engine dying mid-reply.
package sidecar

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/store"
)

// ListenPrefix starts the one stdout line Serve prints once it accepts connections; the URL follows.
const ListenPrefix = "vkllm serve: listening on "

// DefaultListen binds loopback on a free port.
const DefaultListen = "127.0.0.1:0"

// TokenFileName is the token file in the data dir when ServeOptions.TokenFile is empty.
const TokenFileName = "sidecar.token"

// ServeOptions configure the `vkllm serve` process.
type ServeOptions struct {
	ModelPath        string         // GGUF to load at start; "" = the embedded default model
	Listen           string         // host:port; "" = DefaultListen
	TokenFile        string         // "" = TokenFileName in the data dir
	AllowNonLoopback bool           // permit binding an address other than loopback (--allow-remote)
	Backend          engine.Backend // where the forward pass runs; "" = auto
	Context          int            // requested context; 0 = the model's own, capped by the plan
	Device           *int           // Vulkan device index; nil = VKLLM_DEVICE, else the best
	KV               string         // KV cache type; "" = f16 (engine.KVTypes)

	// Out receives the listening line; nil = os.Stdout.
	Out io.Writer
	// Load replaces the engine loader (tests use a scripted model); nil = engine.Load.
	Load LoadFunc
	// Check refuses a model file before the loaded model is closed for it; nil with Load nil =
	// the engine's preflight (the file opens as GGUF and its hyperparameters read).
	Check func(path string) error

	// ReadHeaderTimeout, IdleTimeout and MaxConns bound the connections (zero = the defaults in
	// listen.go): the time to send a request's header, the time a keep-alive connection may sit
	// idle, and how many may be open at once.
	ReadHeaderTimeout, IdleTimeout time.Duration
	MaxConns                       int
}

// Serve loads the model, listens, prints the listening line and serves until ctx ends.
func Serve(ctx context.Context, opts ServeOptions) error {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if err := checkLoopback(opts.Listen, opts.AllowNonLoopback); err != nil {
		return err
	}
	if opts.TokenFile == "" {
		dir, err := store.DefaultDir()
		if err != nil {
			return err
		}
		opts.TokenFile = filepath.Join(dir, TokenFileName)
	}
	token, err := loadOrCreateToken(opts.TokenFile)
	if err != nil {
		return err
	}
	check := opts.Check
	if opts.Load == nil {
		opts.Load = engineLoad
		if check == nil {
			check = enginePreflight
		}
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	s := &server{token: token, load: opts.Load, check: check, state: "loading",
		defaults: LoadRequest{Ctx: opts.Context, Backend: string(opts.Backend), Device: opts.Device, KV: opts.KV}}
	s.queue.acquire(ctx) // released by the start-up load below
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick another port with --listen 127.0.0.1:PORT, or 0 for a free one)", opts.Listen, err)
	}
	if opts.ReadHeaderTimeout <= 0 {
		opts.ReadHeaderTimeout = defaultReadHeaderTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = defaultIdleTimeout
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = defaultMaxConns
	}
	ln = newLimitListener(ln, opts.MaxConns)
	// No ReadTimeout or WriteTimeout: a chat body may be large and a streamed reply long.
	srv := &http.Server{
		Handler: s.routes(), ReadHeaderTimeout: opts.ReadHeaderTimeout, IdleTimeout: opts.IdleTimeout,
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	slog.Info("sidecar listening", "addr", ln.Addr().String(), "token_file", opts.TokenFile)
	if _, err := fmt.Fprintf(opts.Out, "%shttp://%s\n", ListenPrefix, ln.Addr().String()); err != nil {
		srv.Close()
		return fmt.Errorf("print the listening address: %w", err)
	}

	// Load the start-up model holding the queue (taken above, before the first request could
	// arrive), so requests wait for it in line.
	go func() {
		defer s.queue.release()
		if _, err := s.loadLocked(ctx, LoadRequest{Path: opts.ModelPath}); err != nil {
			slog.Error("load start-up model", "path", opts.ModelPath, "err", err)
		}
	}()

	select {
	case err := <-errc:
		s.unload()
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	srv.Shutdown(shutdownCtx)
	// Close the model only once no generation is mid-flight (the process exits either way).
	if s.queue.acquire(shutdownCtx) == nil {
		s.unload()
	}
	return nil
}

// checkLoopback refuses a listen address other than loopback unless allowed.
func checkLoopback(listen string, allow bool) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("listen address %q: %w (want host:port such as 127.0.0.1:8080)", listen, err)
	}
	if allow {
		if !isLoopback(host) {
			slog.Warn("listening beyond loopback (--allow-remote): the bearer token is the only protection, and the traffic is not encrypted", "listen", listen)
		}
		return nil
	}
	if isLoopback(host) {
		return nil
	}
	return fmt.Errorf("listen address %q is not loopback: anyone who can reach it and knows the token could use your GPU; pass --allow-remote to bind it anyway", listen)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// server holds the loaded model and serializes work on it.
type server struct {
	token    string
	load     LoadFunc
	defaults LoadRequest // the serve flags: what a load request leaves out
	queue    fifo        // one generation or load at a time, first come first served

	// check refuses a model file before the loaded model is closed for it (nil = no preflight).
	check func(path string) error

	mu        sync.Mutex
	model     Model
	modelPath string      // where model came from ("" = the embedded model)
	modelReq  LoadRequest // how it was loaded, to load it again when a new one fails
	state     string      // loading | ready | empty | error
	loadError string      // the last failed load, also while the previous model keeps serving
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	mux.HandleFunc("GET /vkllm/health", s.handleHealth)
	mux.HandleFunc("GET /vkllm/model", s.handleModel)
	mux.HandleFunc("POST /vkllm/load", s.handleLoad)
	mux.HandleFunc("POST /vkllm/unload", s.handleUnload)
	s.extraRoutes(mux)
	return s.auth(mux)
}

// auth requires "Authorization: Bearer <token>" on every request, compared in constant time.
// No CORS headers are ever set, so browsers refuse cross-origin reads.
func (s *server) auth(next http.Handler) http.Handler {
	want := []byte("Bearer " + s.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vkllm"`)
			w.Header().Set("Connection", "close") // an unauthenticated client keeps no connection open
			writeError(w, http.StatusUnauthorized, "authentication_error", "missing or wrong bearer token: send Authorization: Bearer <the token in the sidecar's token file>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// current returns the loaded model, or an error saying why there is none.
func (s *server) current() (Model, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model != nil {
		return s.model, nil
	}
	if s.loadError != "" {
		return nil, fmt.Errorf("no model loaded: the last load failed: %s (open another model file; API: POST /vkllm/load)", s.loadError)
	}
	return nil, errors.New("no model loaded (open a model file first; API: POST /vkllm/load {\"path\": ...})")
}

// LoadRequest is the body of POST /vkllm/load: the model and its load options. An option left
// out takes the server's own (its serve flags).
type LoadRequest struct {
	Path    string `json:"path"`              // GGUF file; "" = the embedded model
	Ctx     int    `json:"ctx,omitempty"`     // requested context; 0 = the model's own, capped by the plan
	Backend string `json:"backend,omitempty"` // "auto" (the plan decides), "gpu" (or fail), "cpu"
	Device  *int   `json:"device,omitempty"`  // Vulkan device index; absent = VKLLM_DEVICE, else the best
	KV      string `json:"kv,omitempty"`      // KV cache type: "f16" (the default), "f32" (CPU only)
}

// check refuses fields out of range, naming the field.
func (req LoadRequest) check() error {
	switch {
	case req.Ctx < 0:
		return fmt.Errorf("ctx %d is negative: want 0 (the model's own) or more", req.Ctx)
	case req.Device != nil && *req.Device < 0:
		return fmt.Errorf("device %d is negative: want a Vulkan device index from `vkllm devices`, or leave it out", *req.Device)
	}
	switch engine.Backend(req.Backend) {
	case "", engine.BackendAuto, engine.BackendGPU, engine.BackendCPU:
	default:
		return fmt.Errorf("backend %q is unknown: want auto, gpu or cpu", req.Backend)
	}
	return nil
}

// withDefaults fills what req leaves out from d.
func (req LoadRequest) withDefaults(d LoadRequest) LoadRequest {
	if req.Ctx == 0 {
		req.Ctx = d.Ctx
	}
	if req.Backend == "" {
		req.Backend = d.Backend
	}
	if req.Device == nil {
		req.Device = d.Device
	}
	if req.KV == "" {
		req.KV = d.KV
	}
	return req
}

// loadModel replaces the loaded model; it waits its turn in the queue.
func (s *server) loadModel(ctx context.Context, req LoadRequest) (engine.ModelInfo, error) {
	if err := s.queue.acquire(ctx); err != nil {
		return engine.ModelInfo{}, err
	}
	defer s.queue.release()
	return s.loadLocked(ctx, req)
}

// loadLocked is loadModel for a caller that holds the queue. A failed load never leaves the
// server without the model it had: a file the preflight refuses is refused before the loaded
// model is touched, and when the load itself fails the previous model is loaded again (the old one
// is closed first so its memory, VRAM above all, is free for the plan of the new one).
func (s *server) loadLocked(ctx context.Context, req LoadRequest) (engine.ModelInfo, error) {
	path := req.Path
	s.mu.Lock()
	prev, prevReq := s.model, s.modelReq
	s.mu.Unlock()
	prevPath := prevReq.Path
	if prev != nil && s.check != nil {
		if err := s.check(path); err != nil {
			return engine.ModelInfo{}, s.keepServing(prev, path, err)
		}
	}
	s.unload()
	s.mu.Lock()
	s.state = "loading"
	s.mu.Unlock()
	m, err := s.loadFile(ctx, req)
	if err == nil {
		s.serve(m, req)
		return m.Info(), nil
	}
	if prev == nil {
		s.mu.Lock()
		s.state, s.loadError = "error", err.Error()
		s.mu.Unlock()
		return engine.ModelInfo{}, fmt.Errorf("load model %q: %w", path, err)
	}
	// Restore with a context of its own: the request that asked for the new model may be gone.
	restored, rerr := s.loadFile(context.WithoutCancel(ctx), prevReq)
	if rerr != nil {
		s.mu.Lock()
		s.state, s.loadError = "error", err.Error()
		s.mu.Unlock()
		slog.Error("restore the previous model after a failed load", "path", prevPath, "err", rerr)
		return engine.ModelInfo{}, fmt.Errorf("load model %q: %w; reloading the previous model %q failed too (%v), so none is loaded: open a model file", path, err, prevPath, rerr)
	}
	s.serve(restored, prevReq)
	return engine.ModelInfo{}, s.keepServing(restored, path, err)
}

// keepServing records a failed load of path while m still serves and returns its error.
func (s *server) keepServing(m Model, path string, err error) error {
	name := m.Info().Name
	s.mu.Lock()
	s.loadError = err.Error()
	s.mu.Unlock()
	slog.Warn("model load failed; the previous model keeps serving", "path", path, "serving", name, "err", err)
	return fmt.Errorf("load model %q: %w; %s keeps serving (fix the file or open another one)", path, err, name)
}

func (s *server) loadFile(ctx context.Context, req LoadRequest) (Model, error) {
	req = req.withDefaults(s.defaults)
	opts := engine.LoadOptions{Path: req.Path, Backend: engine.Backend(req.Backend), Context: req.Ctx, DeviceIndex: -1, KV: req.KV, StoredPinMB: store.StoredPinMB}
	if req.Device != nil {
		opts.DeviceIndex = *req.Device
	}
	return s.load(ctx, opts)
}

// serve makes m, loaded by req, the model requests use.
func (s *server) serve(m Model, req LoadRequest) {
	info := m.Info()
	s.mu.Lock()
	s.model, s.modelPath, s.modelReq, s.state, s.loadError = m, req.Path, req, "ready", ""
	s.mu.Unlock()
	slog.Info("model loaded", "name", info.Name, "backend", info.Backend, "placement", info.Placement)
}

// unload closes the model; callers hold the queue.
func (s *server) unload() {
	s.mu.Lock()
	m := s.model
	s.model, s.state = nil, "empty"
	s.mu.Unlock()
	if m != nil {
		if err := m.Close(); err != nil {
			slog.Warn("close model", "err", err)
		}
	}
}

// Health is the body of GET /vkllm/health.
type Health struct {
	Status    string            `json:"status"` // loading | ready | empty | error
	PID       int               `json:"pid"`
	Model     *engine.ModelInfo `json:"model,omitempty"`
	LoadError string            `json:"load_error,omitempty"`
	Queued    int               `json:"queued"`
}

func (s *server) handleHealth(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := Health{Status: s.state, PID: os.Getpid(), LoadError: s.loadError, Queued: s.queue.waiting()}
	if s.model != nil {
		info := s.model.Info()
		h.Model = &info
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, h)
}

func (s *server) handleModel(w http.ResponseWriter, r *http.Request) {
	m, err := s.current()
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, m.Info())
}

func (s *server) handleLoad(w http.ResponseWriter, r *http.Request) {
	var req LoadRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if err := req.check(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	info, err := s.loadModel(r.Context(), req)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "invalid_request_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *server) handleUnload(w http.ResponseWriter, r *http.Request) {
	if err := s.queue.acquire(r.Context()); err != nil {
		return
	}
	s.unload()
	s.queue.release()
	writeJSON(w, http.StatusOK, map[string]string{"status": "empty"})
}

// maxBody is the most bytes any request body may have.
const maxBody = 64 << 20

// decodeBody reads one JSON object from the body (at most maxBody bytes) into v.
func decodeBody(r *http.Request, v any) error { return decodeBodyMax(r, v, maxBody) }

// decodeBodyMax reads one JSON object of at most limit bytes into v; anything after the object
// but whitespace is refused.
func decodeBodyMax(r *http.Request, v any, limit int64) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, limit))
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("request body is over its limit of %d bytes", limit)
		}
		return fmt.Errorf("request body is not the expected JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("request body has more after its JSON object: send exactly one object")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		slog.Debug("write response", "err", err)
	}
}

// apiError is the OpenAI error body.
type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	var e apiError
	e.Error.Message, e.Error.Type = msg, typ
	writeJSON(w, code, e)
}
