//go:build !windows

package sidecar

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
)

// startChildWith is startChild with the supervisor's timeouts set.
func startChildWith(t *testing.T, log *eventLog, opts SupervisorOptions, extra ...string) *Supervisor {
	t.Helper()
	t.Setenv(childEnv, "1")
	opts.Binary, opts.Args, opts.DataDir, opts.OnEvent = os.Args[0], append([]string{"serve"}, extra...), t.TempDir(), log.add
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSupervisorRestartsAStoppedEngineWithinItsHealthDeadline(t *testing.T) {
	var log eventLog
	const deadline = 600 * time.Millisecond
	s := startChildWith(t, &log, SupervisorOptions{HealthInterval: 50 * time.Millisecond, HealthDeadline: deadline}, "--delay", "20ms")
	pid := s.PID()
	stopped := make(chan time.Time, 1)
	// A chat in flight when the engine stops ends as ErrEngineDied once the monitor kills it.
	type chatEnd struct {
		res ChatResult
		err error
	}
	ended := make(chan chatEnd, 1)
	go func() {
		res, err := s.ChatStream(context.Background(), ChatRequest{Messages: []engine.Message{{Role: "user", Content: "x"}}, MaxTokens: 500}, func(string) error {
			select {
			case stopped <- time.Now():
				if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
					t.Errorf("SIGSTOP %d: %v", pid, err)
				}
			default:
			}
			return nil
		})
		ended <- chatEnd{res, err}
	}()
	var end chatEnd
	select {
	case end = <-ended:
	case <-time.After(deadline + 10*time.Second):
		t.Fatal("a chat to the stopped engine still hangs 10 s past the health deadline")
	}
	if res, err := end.res, end.err; !errors.Is(err, ErrEngineDied) || res.Text == "" {
		t.Fatalf("chat across a SIGSTOP: %q, %v; want the partial text and ErrEngineDied", res.Text, err)
	}
	ev := log.wait(t, EventRestarted, deadline+10*time.Second)
	at := <-stopped
	// The deadline, one probe's timeout (half of it) and the restart itself (a process start).
	if took := time.UnixMilli(ev.AtMs).Sub(at); took > deadline+deadline/2+3*time.Second {
		t.Errorf("restarted %v after the SIGSTOP, want within the %v deadline plus a probe and a start", took, deadline)
	}
	if !strings.Contains(ev.Reason, "no health check") {
		t.Errorf("restart reason %q does not say the engine stopped answering", ev.Reason)
	}
	if s.PID() == pid {
		t.Fatal("the stopped engine is still the current one")
	}
	if _, err := s.ChatStream(context.Background(), ChatRequest{Messages: []engine.Message{{Role: "user", Content: "y"}}, MaxTokens: 2}, func(string) error { return nil }); err != nil {
		t.Fatalf("chat after the restart: %v", err)
	}
}

func TestSupervisorRewritesAMissingTokenFileOnRestart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(path string) error
	}{
		{"deleted", os.Remove},
		{"replaced", func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("f", 64)+"\n"), 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log eventLog
			s := startChildWith(t, &log, SupervisorOptions{}, "--delay", "1ms")
			if err := tc.damage(s.tokenFile); err != nil {
				t.Fatal(err)
			}
			syscall.Kill(s.PID(), syscall.SIGKILL)
			log.wait(t, EventRestarted, 15*time.Second)
			if _, err := s.Model(context.Background()); err != nil {
				t.Fatalf("model after the restart: %v", err)
			}
			tok, err := readToken(s.tokenFile)
			st, serr := os.Stat(s.tokenFile)
			if err != nil || tok != s.token || serr != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("token file after the restart: %q, %v, %v; want the supervisor's token, mode 0600", tok, err, serr)
			}
		})
	}
}

// fakeInstance makes s talk to an HTTP server instead of a process.
func fakeInstance(t *testing.T, h http.Handler, opts SupervisorOptions) *Supervisor {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s := &Supervisor{opts: opts.withDefaults(), token: "t", client: &http.Client{Transport: &http.Transport{}}, ready: make(chan struct{})}
	s.setCurrent(&instance{base: srv.URL})
	return s
}

func TestSupervisorRequestsTimeOutWaitingForTheHeaderNotTheStream(t *testing.T) {
	const wait = 200 * time.Millisecond
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	silent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server notices a client gone only once the body is read
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	// Streams its header at once, then a chunk every 100 ms for well past the timeout.
	slowStream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for i := range 6 {
			time.Sleep(100 * time.Millisecond)
			piece := "x"
			if i > 0 {
				piece = " x"
			}
			w.Write([]byte(`data: {"choices":[{"index":0,"delta":{"content":"` + piece + `"}}]}` + "\n\n"))
			w.(http.Flusher).Flush()
		}
		w.Write([]byte("data: [DONE]\n\n"))
	})
	opts := SupervisorOptions{RequestTimeout: wait, StreamTimeout: wait, LoadTimeout: wait}
	chat := func(s *Supervisor) error {
		_, err := s.ChatStream(context.Background(), ChatRequest{Messages: []engine.Message{{Role: "user", Content: "x"}}}, func(string) error { return nil })
		return err
	}
	for _, tc := range []struct {
		name    string
		handler http.Handler
		do      func(s *Supervisor) error
		wantErr bool
	}{
		{"model, no answer", silent, func(s *Supervisor) error { _, err := s.Model(context.Background()); return err }, true},
		{"load, no answer", silent, func(s *Supervisor) error { _, err := s.LoadModel(context.Background(), "/m.gguf"); return err }, true},
		{"chat, no header", silent, chat, true},
		{"bench, no header", silent, func(s *Supervisor) error { _, err := s.Bench(context.Background(), BenchRequest{}, nil); return err }, true},
		{"chat streaming 0.6 s", slowStream, chat, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakeInstance(t, tc.handler, opts)
			start := time.Now()
			err := tc.do(s)
			took := time.Since(start)
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("a stream longer than the header timeout: %v, want it whole", err)
				}
				return
			}
			if !errors.Is(err, errNoAnswer) || !strings.Contains(err.Error(), "no answer within 200ms") {
				t.Fatalf("err %v, want no answer within 200ms", err)
			}
			if took > wait+2*time.Second {
				t.Fatalf("gave up after %v, want about %v", took, wait)
			}
		})
	}
}
