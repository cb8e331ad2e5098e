package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/engine/sample"
)

// ErrEngineDied marks a request cut short because the sidecar process exited; the supervisor is
// already restarting it.
var ErrEngineDied = errors.New("engine process died")

// Event kinds sent to SupervisorOptions.OnEvent.
const (
	EventStarted   = "engine:started"
	EventRestarted = "engine:restarted"
	EventStopped   = "engine:stopped"
)

// Restart backoff: the first restart waits backoffMin, each quick crash doubles it up to
// backoffMax, and a process that stayed up for stableAfter resets it.
const (
	backoffMin   = 100 * time.Millisecond
	backoffMax   = 4 * time.Second
	stableAfter  = 10 * time.Second
	startTimeout = 60 * time.Second
)

// Defaults for the SupervisorOptions timeouts.
const (
	defaultHealthInterval = 2 * time.Second
	defaultHealthDeadline = 20 * time.Second
	defaultRequestTimeout = 30 * time.Second
	defaultLoadTimeout    = 10 * time.Minute
	defaultStreamTimeout  = 10 * time.Minute
)

// errNoAnswer marks a request the engine sent no response header for within its timeout.
var errNoAnswer = errors.New("the engine sent no answer")

// SupervisorOptions say how to start the sidecar.
type SupervisorOptions struct {
	Binary  string   // the vkllm executable (the app passes its own)
	Args    []string // e.g. ["serve", "-m", path]; the supervisor appends --token-file
	DataDir string   // where the per-launch token file is written (mode 0600)
	OnEvent func(Event)

	// HealthInterval is how often the running engine's health is probed, and HealthDeadline how
	// long it may go without a good answer before it is killed as hung and restarted.
	HealthInterval, HealthDeadline time.Duration
	// RequestTimeout bounds the wait for the answer's header of a short request (health, model,
	// devices, plan), LoadTimeout that of a model load, and StreamTimeout that of a chat or bench
	// stream (it may wait in line behind other work); a streamed body has no limit, since a hung
	// engine is caught by the health deadline instead. Zero means the defaults above.
	RequestTimeout, LoadTimeout, StreamTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait before a restart (see backoffMin); zero means
	// those defaults. Tests that crash the engine many times shorten them.
	BackoffMin, BackoffMax time.Duration
}

// withDefaults fills the zero timeouts.
func (o SupervisorOptions) withDefaults() SupervisorOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.HealthInterval, defaultHealthInterval)
	def(&o.HealthDeadline, defaultHealthDeadline)
	def(&o.RequestTimeout, defaultRequestTimeout)
	def(&o.LoadTimeout, defaultLoadTimeout)
	def(&o.StreamTimeout, defaultStreamTimeout)
	def(&o.BackoffMin, backoffMin)
	def(&o.BackoffMax, max(backoffMax, o.BackoffMin))
	return o
}

// Event is an engine lifecycle event for the UI.
type Event struct {
	Kind   string `json:"kind"`   // engine:started | engine:restarted | engine:stopped
	Reason string `json:"reason"` // for restarted: how the previous process ended
	AtMs   int64  `json:"at_ms"`
}

// ChatRequest is one chat turn for ChatStream.
type ChatRequest struct {
	Messages  []engine.Message
	MaxTokens int
	Sampling  sample.Params
	Stop      []string
}

// ChatResult is what a chat turn produced (partial when err matches ErrEngineDied).
type ChatResult struct {
	Text    string
	Stop    engine.StopReason
	Timings engine.Timings
}

// instance is one running sidecar process.
type instance struct {
	cmd    *exec.Cmd
	base   string        // http://127.0.0.1:PORT
	exited chan struct{} // closed when the process has exited
	err    error         // how it exited; valid after exited is closed
	hung   string        // why the health monitor killed it; guarded by Supervisor.mu
}

// Supervisor keeps one sidecar process running and talks to it.
type Supervisor struct {
	opts      SupervisorOptions
	token     string
	tokenFile string
	client    *http.Client

	mu        sync.Mutex
	cur       *instance     // nil while (re)starting
	ready     chan struct{} // closed when cur is set; replaced when it goes away
	closed    bool
	modelPath *string      // the model last loaded through LoadModel, restored after a restart
	loadReq   *LoadRequest // its load options when LoadModelWith loaded it (nil = the engine's own)
	unloaded  bool         // UnloadModel emptied the engine: a restarted one is emptied too

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// Start spawns the sidecar, waits until it answers /vkllm/health, and keeps it running.
func Start(ctx context.Context, opts SupervisorOptions) (*Supervisor, error) {
	if opts.Binary == "" {
		return nil, errors.New("start engine: no binary given (the app passes its own executable; VKLLM_SIDECAR overrides it)")
	}
	if opts.DataDir == "" {
		return nil, errors.New("start engine: no data dir for the token file")
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %s: %w (make it writable or set VKLLM_DATA_DIR)", opts.DataDir, err)
	}
	tok, err := newToken()
	if err != nil {
		return nil, err
	}
	// A private file per supervisor (CreateTemp uses mode 0600), so the token never appears on a
	// command line and two app instances sharing a data dir do not overwrite each other's.
	f, err := os.CreateTemp(opts.DataDir, "sidecar-*.token")
	if err != nil {
		return nil, fmt.Errorf("create token file in %s: %w (make it writable or set VKLLM_DATA_DIR)", opts.DataDir, err)
	}
	f.Close()
	if err := writeTokenFile(f.Name(), tok); err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	opts = opts.withDefaults()
	sctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{
		opts: opts, token: tok, tokenFile: f.Name(),
		// Idle connections are dropped before the sidecar's IdleTimeout closes them, so a
		// request never goes out on a connection the server is closing.
		client: &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4, IdleConnTimeout: defaultIdleTimeout / 2}},
		ready:  make(chan struct{}),
		ctx:    sctx, cancel: cancel, done: make(chan struct{}),
	}
	inst, err := s.spawn(ctx)
	if err != nil {
		cancel()
		os.Remove(s.tokenFile)
		return nil, err
	}
	s.setCurrent(inst)
	s.emit(EventStarted, "")
	go s.monitor(inst)
	go s.watch(inst)
	return s, nil
}

// ensureToken writes the token file again when it is gone or no longer holds this supervisor's
// token (deleted by a clean-up, say): the engine would otherwise make a token of its own that the
// supervisor does not know, and every restart would fail on 401.
func (s *Supervisor) ensureToken() error {
	if tok, err := readToken(s.tokenFile); err == nil && tok == s.token {
		return nil
	}
	slog.Warn("token file missing or changed; writing it again", "path", s.tokenFile)
	return writeTokenFile(s.tokenFile, s.token)
}

// monitor probes inst's health every HealthInterval and kills the process when no probe has
// succeeded for HealthDeadline: watch then restarts a hung (or SIGSTOPped) engine as it does a
// crashed one.
func (s *Supervisor) monitor(inst *instance) {
	tick := time.NewTicker(s.opts.HealthInterval)
	defer tick.Stop()
	probe := max(s.opts.HealthDeadline/2, s.opts.HealthInterval)
	lastOK := time.Now()
	for {
		select {
		case <-inst.exited:
			return
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, probe)
		_, err := s.health(ctx, inst.base)
		cancel()
		if err == nil {
			lastOK = time.Now()
			continue
		}
		if s.ctx.Err() != nil {
			return
		}
		if silent := time.Since(lastOK); silent >= s.opts.HealthDeadline {
			reason := fmt.Sprintf("engine answered no health check for %s (hung or stopped), so it was killed", silent.Round(10*time.Millisecond))
			slog.Error("engine hung; killing it", "pid", inst.cmd.Process.Pid, "silent", silent, "last_err", err)
			s.mu.Lock()
			inst.hung = reason
			s.mu.Unlock()
			inst.cmd.Process.Kill()
			return
		}
	}
}

func (s *Supervisor) emit(kind, reason string) {
	if kind == EventRestarted {
		slog.Warn("engine restarted", "reason", reason)
	}
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(Event{Kind: kind, Reason: reason, AtMs: time.Now().UnixMilli()})
	}
}

func (s *Supervisor) setCurrent(inst *instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = inst
	close(s.ready)
}

// spawn starts one process and waits for its listening line and a healthy answer.
func (s *Supervisor) spawn(ctx context.Context) (*instance, error) {
	if err := s.ensureToken(); err != nil {
		return nil, err
	}
	args := append(append([]string{}, s.opts.Args...), "--token-file", s.tokenFile)
	cmd := exec.Command(s.opts.Binary, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start engine %s: %w", s.opts.Binary, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start engine %s: %w", s.opts.Binary, err)
	}
	inst := &instance{cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if !sent && strings.HasPrefix(line, ListenPrefix) {
				addr <- strings.TrimSpace(strings.TrimPrefix(line, ListenPrefix))
				sent = true
				continue
			}
			slog.Info("engine", "out", line)
		}
		// stdout reaches EOF when the process exits; only then is Wait safe with the pipe.
		inst.err = cmd.Wait()
		close(inst.exited)
	}()
	fail := func(err error) (*instance, error) {
		cmd.Process.Kill()
		<-inst.exited
		return nil, err
	}
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case inst.base = <-addr:
	case <-inst.exited:
		return nil, fmt.Errorf("engine %s exited before listening: %v (see its log above)", s.opts.Binary, inst.err)
	case <-timer.C:
		return fail(fmt.Errorf("engine %s printed no %q line within %s", s.opts.Binary, ListenPrefix, startTimeout))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	for {
		h, err := s.health(ctx, inst.base)
		if err == nil && h.Status != "loading" {
			if h.Status == "error" {
				slog.Warn("engine started without a model", "err", h.LoadError)
			}
			return inst, nil
		}
		select {
		case <-inst.exited:
			return nil, fmt.Errorf("engine %s exited while starting: %v (see its log above)", s.opts.Binary, inst.err)
		case <-timer.C:
			return fail(fmt.Errorf("engine at %s not healthy within %s (last: %v)", inst.base, startTimeout, err))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// watch restarts the process whenever it exits, until Close.
func (s *Supervisor) watch(inst *instance) {
	defer close(s.done)
	backoff := s.opts.BackoffMin
	for {
		started := time.Now()
		select {
		case <-inst.exited:
		case <-s.ctx.Done():
			return
		}
		reason := exitReason(inst.err)
		s.mu.Lock()
		if inst.hung != "" {
			reason = inst.hung
		}
		if s.closed {
			s.mu.Unlock()
			return
		}
		s.cur = nil
		s.ready = make(chan struct{})
		s.mu.Unlock()
		slog.Warn("engine exited; restarting", "reason", reason, "backoff", backoff)
		if time.Since(started) > stableAfter {
			backoff = s.opts.BackoffMin
		}
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, s.opts.BackoffMax)
			next, err := s.spawn(s.ctx)
			if err != nil {
				if s.ctx.Err() != nil {
					return
				}
				slog.Error("restart engine", "err", err)
				reason += "; restart failed: " + err.Error()
				continue
			}
			inst = next
			break
		}
		s.restoreModel(inst)
		s.setCurrent(inst)
		go s.monitor(inst)
		s.emit(EventRestarted, reason)
	}
}

// exitReason is the process's end as the UI shows it: "exit status 2", "signal: killed".
func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// restoreModel reloads the model the app had switched to before the crash.
func (s *Supervisor) restoreModel(inst *instance) {
	s.mu.Lock()
	path, unloaded, req := s.modelPath, s.unloaded, s.loadReq
	s.mu.Unlock()
	if unloaded {
		if err := s.call(s.ctx, inst, http.MethodPost, "/vkllm/unload", struct{}{}, nil); err != nil {
			slog.Error("unload the model again after restart", "err", err)
		}
		return
	}
	if path == nil {
		return
	}
	body := LoadRequest{Path: *path}
	if req != nil {
		body = *req
	}
	var info engine.ModelInfo
	if err := s.call(s.ctx, inst, http.MethodPost, "/vkllm/load", body, &info); err != nil {
		slog.Error("reload model after restart", "path", *path, "err", err)
	}
}

// current waits for a running process.
func (s *Supervisor) current(ctx context.Context) (*instance, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errors.New("engine supervisor is closed")
		}
		inst, ready := s.cur, s.ready
		s.mu.Unlock()
		if inst != nil {
			return inst, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the engine to restart: %w", ctx.Err())
		}
	}
}

// PID is the running sidecar's process id (0 while restarting).
func (s *Supervisor) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return 0
	}
	return s.cur.cmd.Process.Pid
}

func (s *Supervisor) newRequest(ctx context.Context, inst *instance, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode %s body: %w", path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, inst.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build %s request: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

func (s *Supervisor) health(ctx context.Context, base string) (Health, error) {
	var h Health
	err := s.call(ctx, &instance{base: base}, http.MethodGet, "/vkllm/health", nil, &h)
	return h, err
}

// call does one JSON request; out may be *json.RawMessage.
func (s *Supervisor) call(ctx context.Context, inst *instance, method, path string, body, out any) error {
	wait := s.opts.RequestTimeout
	if path == "/vkllm/load" {
		wait = s.opts.LoadTimeout
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := s.newRequest(ctx, inst, method, path, body)
	if err != nil {
		return err
	}
	resp, err := s.send(req, cancel, wait)
	if errors.Is(err, errNoAnswer) {
		return fmt.Errorf("engine %s: %w", path, err)
	}
	if err != nil {
		return s.transportError(ctx, inst, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return s.transportError(ctx, inst, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("engine %s: %s", path, apiMessage(resp.Status, b))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("engine %s: decode answer: %w", path, err)
	}
	return nil
}

// send does req and fails with errNoAnswer when no response header came within wait (cancel is
// the cancel of req's context). The body is not timed: a streamed reply may run for minutes.
func (s *Supervisor) send(req *http.Request, cancel context.CancelFunc, wait time.Duration) (*http.Response, error) {
	timer := time.AfterFunc(wait, cancel)
	resp, err := s.client.Do(req)
	if !timer.Stop() {
		// The timer fired, so the request's context is cancelled (the body too, if it came).
		if err == nil {
			resp.Body.Close()
		}
		return nil, fmt.Errorf("%w within %s (it is busy or hung; a hung engine is restarted)", errNoAnswer, wait)
	}
	return resp, err
}

func apiMessage(status string, body []byte) string {
	var e apiError
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return status + ": " + strings.TrimSpace(string(body))
}

// transportError says whether a broken connection was the engine dying: the process exit is
// usually seen within milliseconds of the connection reset.
func (s *Supervisor) transportError(ctx context.Context, inst *instance, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("engine %s: %w", what, ctx.Err())
	}
	if inst.exited != nil {
		select {
		case <-inst.exited:
			return fmt.Errorf("engine %s: %w (%s); it is being restarted", what, ErrEngineDied, exitReason(inst.err))
		case <-time.After(2 * time.Second):
		}
	}
	return fmt.Errorf("engine %s: %w", what, err)
}

// Model returns the loaded model's facts.
func (s *Supervisor) Model(ctx context.Context) (engine.ModelInfo, error) {
	inst, err := s.current(ctx)
	if err != nil {
		return engine.ModelInfo{}, err
	}
	var info engine.ModelInfo
	err = s.call(ctx, inst, http.MethodGet, "/vkllm/model", nil, &info)
	return info, err
}

// LoadModel switches the engine to the GGUF at path ("" = the embedded model); it is reloaded
// automatically if the engine restarts.
func (s *Supervisor) LoadModel(ctx context.Context, path string) (engine.ModelInfo, error) {
	inst, err := s.current(ctx)
	if err != nil {
		return engine.ModelInfo{}, err
	}
	var info engine.ModelInfo
	if err := s.call(ctx, inst, http.MethodPost, "/vkllm/load", map[string]string{"path": path}, &info); err != nil {
		return engine.ModelInfo{}, err
	}
	s.mu.Lock()
	s.modelPath, s.loadReq, s.unloaded = &path, nil, false
	s.mu.Unlock()
	return info, nil
}

// UnloadModel empties the engine (POST /vkllm/unload), freeing the model's memory and VRAM; it
// stays empty across restarts until LoadModel.
func (s *Supervisor) UnloadModel(ctx context.Context) error {
	inst, err := s.current(ctx)
	if err != nil {
		return err
	}
	if err := s.call(ctx, inst, http.MethodPost, "/vkllm/unload", struct{}{}, nil); err != nil {
		return err
	}
	s.mu.Lock()
	s.modelPath, s.loadReq, s.unloaded = nil, nil, true
	s.mu.Unlock()
	return nil
}

// Devices returns GET /vkllm/devices as raw JSON.
func (s *Supervisor) Devices(ctx context.Context) (json.RawMessage, error) {
	inst, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	var out json.RawMessage
	err = s.call(ctx, inst, http.MethodGet, "/vkllm/devices", nil, &out)
	return out, err
}

// Plan posts req to /vkllm/plan and returns the plan JSON (the same as `vkllm plan --json`).
func (s *Supervisor) Plan(ctx context.Context, req any) (json.RawMessage, error) {
	inst, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	var out json.RawMessage
	err = s.call(ctx, inst, http.MethodPost, "/vkllm/plan", req, &out)
	return out, err
}

// ChatStream runs one chat turn through /v1/chat/completions, calling onDelta with each piece of
// text. If the engine dies mid-reply it returns the text so far and an error matching
// ErrEngineDied; an error from onDelta stops the generation and is returned.
func (s *Supervisor) ChatStream(ctx context.Context, req ChatRequest, onDelta func(delta string) error) (ChatResult, error) {
	var res ChatResult
	inst, err := s.current(ctx)
	if err != nil {
		return res, err
	}
	p := req.Sampling
	body := map[string]any{
		"messages": req.Messages, "stream": true, "temperature": p.Temperature, "top_k": p.TopK,
		"top_p": p.TopP, "min_p": p.MinP, "repeat_penalty": p.RepeatPenalty, "repeat_last_n": p.RepeatLastN,
	}
	if p.Seed != 0 {
		body["seed"] = int64(p.Seed) // the server reads it back as the same 64 bits
	}
	if req.MaxTokens > 0 {
		body["max_tokens"] = req.MaxTokens
	}
	if len(req.Stop) > 0 {
		body["stop"] = req.Stop
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // closing the stream early cancels the generation in the engine
	hreq, err := s.newRequest(ctx, inst, http.MethodPost, "/v1/chat/completions", body)
	if err != nil {
		return res, err
	}
	resp, err := s.send(hreq, cancel, s.opts.StreamTimeout)
	if errors.Is(err, errNoAnswer) {
		return res, fmt.Errorf("engine chat: %w", err)
	}
	if err != nil {
		return res, s.transportError(ctx, inst, "chat", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return res, fmt.Errorf("engine chat: %s", apiMessage(resp.Status, b))
	}
	res, broken, err := readChatStream(ctx, resp.Body, onDelta)
	if broken {
		return res, s.transportError(ctx, inst, "chat", err)
	}
	return res, err
}

// readChatStream reads the engine's server-sent chat chunks from r, passing each piece of text to
// onDelta, until [DONE]. broken reports a stream that ended or failed in transport (err is then
// for transportError to name: a cancelled ctx, the engine's death or the read error); any other
// err is the engine's own message or onDelta's. A cancelled ctx is always a clean cancel: the
// last line of a stream cut by Stop is often a partial chunk, which is never reported as a bad
// one.
func readChatStream(ctx context.Context, r io.Reader, onDelta func(delta string) error) (res ChatResult, broken bool, err error) {
	var text strings.Builder
	defer func() { res.Text = text.String() }()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if ctx.Err() != nil {
			return res, true, ctx.Err()
		}
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return res, false, nil
		}
		var chunk struct {
			chatResponse
			apiError
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			if ctx.Err() != nil {
				return res, true, ctx.Err()
			}
			return res, false, fmt.Errorf("engine chat: bad stream chunk %q: %w", data, err)
		}
		if chunk.Error.Message != "" {
			return res, false, fmt.Errorf("engine chat: %s", chunk.Error.Message)
		}
		for _, c := range chunk.Choices {
			if c.Delta != nil && c.Delta.Content != "" {
				text.WriteString(c.Delta.Content)
				if err := onDelta(c.Delta.Content); err != nil {
					return res, false, err
				}
			}
		}
		if chunk.Timings != nil {
			res.Timings = chunk.Timings.engineTimings()
		}
		if chunk.StopReason != "" {
			res.Stop = engine.StopReason(chunk.StopReason)
		}
	}
	err = sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF // the stream ended without [DONE]
	}
	return res, true, err
}

// Close stops the sidecar (interrupt, then kill after 3 s) and removes the token file.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	inst := s.cur
	s.mu.Unlock()
	s.cancel()
	<-s.done
	if inst == nil {
		s.mu.Lock()
		inst = s.cur
		s.mu.Unlock()
	}
	if inst != nil {
		stopProcess(inst.cmd.Process)
		select {
		case <-inst.exited:
		case <-time.After(3 * time.Second):
			inst.cmd.Process.Kill()
			<-inst.exited
		}
	}
	os.Remove(s.tokenFile)
	s.emit(EventStopped, "closed")
	return nil
}

// Bench runs POST /vkllm/bench on the loaded model, calling onEvent with each progress event, and
// returns the records. Cancelling ctx stops the run; records finished by then come back with the
// error.
func (s *Supervisor) Bench(ctx context.Context, req BenchRequest, onEvent func(BenchEvent)) ([]bench.Record, error) {
	inst, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hreq, err := s.newRequest(ctx, inst, http.MethodPost, "/vkllm/bench", req)
	if err != nil {
		return nil, err
	}
	resp, err := s.send(hreq, cancel, s.opts.StreamTimeout)
	if errors.Is(err, errNoAnswer) {
		return nil, fmt.Errorf("engine bench: %w", err)
	}
	if err != nil {
		return nil, s.transportError(ctx, inst, "bench", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("engine bench: %s", apiMessage(resp.Status, b))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev BenchEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return nil, fmt.Errorf("engine bench: bad event %q: %w", data, err)
		}
		switch ev.Kind {
		case "bench:done":
			return ev.Records, nil
		case "bench:error":
			if ev.Cancelled {
				return ev.Records, fmt.Errorf("engine bench: %s: %w", ev.Error, context.Canceled)
			}
			return ev.Records, fmt.Errorf("engine bench: %s", ev.Error)
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
	err = sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, s.transportError(ctx, inst, "bench", err)
}
