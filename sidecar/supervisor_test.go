package sidecar

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
)

type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) { l.mu.Lock(); l.events = append(l.events, e); l.mu.Unlock() }

func (l *eventLog) kinds() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		out = append(out, e.Kind)
	}
	return out
}

func (l *eventLog) wait(t *testing.T, kind string, d time.Duration) Event {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for _, e := range l.events {
			if e.Kind == kind {
				l.mu.Unlock()
				return e
			}
		}
		l.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s event within %v; got %v", kind, d, l.kinds())
	return Event{}
}

// startChild supervises this test binary acting as `vkllm serve` with the fake model.
func startChild(t *testing.T, log *eventLog, extra ...string) *Supervisor {
	t.Helper()
	t.Setenv(childEnv, "1")
	dir := t.TempDir()
	s, err := Start(context.Background(), SupervisorOptions{
		Binary: os.Args[0], Args: append([]string{"serve"}, extra...), DataDir: dir, OnEvent: log.add,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSupervisorRecoversFromKillMidStream(t *testing.T) {
	var log eventLog
	s := startChild(t, &log, "--delay", "30ms")
	if k := log.kinds(); len(k) != 1 || k[0] != EventStarted {
		t.Fatalf("events after Start: %v, want [engine:started]", k)
	}
	ctx := context.Background()
	// The token never appears on the child's command line.
	if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(s.PID()) + "/cmdline"); err == nil && strings.Contains(string(cmdline), s.token) {
		t.Fatal("the token is on the sidecar's command line")
	}
	if st, err := os.Stat(s.tokenFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %v, mode %v; want 0600", s.tokenFile, err, st.Mode().Perm())
	}

	res, err := s.ChatStream(ctx, ChatRequest{Messages: []engine.Message{{Role: "user", Content: "hi"}}, MaxTokens: 4}, func(string) error { return nil })
	if err != nil || res.Text != fakeText(4) || res.Stop != engine.StopLength || res.Timings.GeneratedTokens != 4 {
		t.Fatalf("first chat: %+v, %v", res, err)
	}

	pid := s.PID()
	var deltas []string
	res, err = s.ChatStream(ctx, ChatRequest{Messages: []engine.Message{{Role: "user", Content: "a long one"}}, MaxTokens: 500},
		func(d string) error {
			deltas = append(deltas, d)
			if len(deltas) == 3 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			return nil
		})
	if !errors.Is(err, ErrEngineDied) {
		t.Fatalf("chat across a kill -9: err %v, want ErrEngineDied", err)
	}
	if !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("error %q does not say how the engine ended", err)
	}
	if len(deltas) < 3 || res.Text != strings.Join(deltas, "") || !strings.HasPrefix(fakeText(500), res.Text) {
		t.Fatalf("partial text %q from deltas %q: want the text streamed before the kill", res.Text, deltas)
	}

	ev := log.wait(t, EventRestarted, 15*time.Second)
	if ev.Reason != "signal: killed" || ev.AtMs == 0 {
		t.Errorf("restarted event %+v, want reason \"signal: killed\"", ev)
	}
	res, err = s.ChatStream(ctx, ChatRequest{Messages: []engine.Message{{Role: "user", Content: "again"}}, MaxTokens: 3}, func(string) error { return nil })
	if err != nil || res.Text != fakeText(3) {
		t.Fatalf("chat after the restart: %+v, %v", res, err)
	}
	if s.PID() == pid {
		t.Fatal("PID unchanged after restart")
	}

	tokenFile := s.tokenFile
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tokenFile); !os.IsNotExist(err) {
		t.Errorf("token file %s left after Close: %v", tokenFile, err)
	}
	if k := log.kinds(); k[len(k)-1] != EventStopped {
		t.Errorf("events %v, want engine:stopped last", k)
	}
}

func TestSupervisorRestoresLoadedModelAfterRestart(t *testing.T) {
	var log eventLog
	s := startChild(t, &log, "--delay", "1ms")
	ctx := context.Background()
	info, err := s.LoadModel(ctx, "/models/chosen.gguf")
	if err != nil || info.Name != "/models/chosen.gguf" {
		t.Fatalf("LoadModel: %+v, %v", info, err)
	}
	syscall.Kill(s.PID(), syscall.SIGKILL)
	log.wait(t, EventRestarted, 15*time.Second)
	info, err = s.Model(ctx)
	if err != nil || info.Name != "/models/chosen.gguf" {
		t.Fatalf("model after restart: %+v, %v; want the one loaded before the crash", info, err)
	}
}

func TestSupervisorCancelStopsGeneration(t *testing.T) {
	var log eventLog
	s := startChild(t, &log, "--delay", "30ms")
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	res, err := s.ChatStream(ctx, ChatRequest{Messages: []engine.Message{{Role: "user", Content: "x"}}, MaxTokens: 500}, func(string) error {
		n++
		if n == 2 {
			cancel()
		}
		return nil
	})
	if err == nil || errors.Is(err, ErrEngineDied) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled chat: %v, want context.Canceled and not ErrEngineDied", err)
	}
	if !strings.HasPrefix(fakeText(500), res.Text) || res.Text == "" {
		t.Fatalf("partial text %q", res.Text)
	}
	// The engine is still the same process and answers the next request.
	if _, err := s.ChatStream(context.Background(), ChatRequest{Messages: []engine.Message{{Role: "user", Content: "y"}}, MaxTokens: 2}, func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, k := range log.kinds() {
		if k == EventRestarted {
			t.Fatal("a cancelled request restarted the engine")
		}
	}
}

func TestStartReportsAMissingBinary(t *testing.T) {
	_, err := Start(context.Background(), SupervisorOptions{Binary: filepath.Join(t.TempDir(), "nope"), Args: []string{"serve"}, DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("Start with a missing binary: %v, want an error naming it", err)
	}
}

func TestSupervisorBacksOffExponentiallyOnRepeatedCrashes(t *testing.T) {
	var log eventLog
	startChild(t, &log, "--crash-after", "300ms")
	deadline := time.Now().Add(20 * time.Second)
	var restarts []Event
	for len(restarts) < 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		log.mu.Lock()
		restarts = restarts[:0]
		for _, e := range log.events {
			if e.Kind == EventRestarted {
				restarts = append(restarts, e)
			}
		}
		log.mu.Unlock()
	}
	if len(restarts) < 4 {
		t.Fatalf("%d restarts within 20 s, want 4: %v", len(restarts), log.kinds())
	}
	for i, e := range restarts[:4] {
		if e.Reason != "exit status 3" {
			t.Errorf("restart %d reason %q, want \"exit status 3\"", i+1, e.Reason)
		}
		if i == 0 {
			continue
		}
		// Restart i+1 waited backoffMin·2^i after the crash, which came after restart i.
		wait := backoffMin << i
		if gap := time.Duration(e.AtMs-restarts[i-1].AtMs) * time.Millisecond; gap < wait {
			t.Errorf("restart %d came %v after the previous one, want at least the %v backoff", i+1, gap, wait)
		}
	}
}
