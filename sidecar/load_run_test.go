package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// loadSeconds is how long each stream count of TestConcurrentStreamsAllCompleteOrAreRefused
// runs: VKLLM_LOAD_SECONDS, else 3 (docs/RELIABILITY.md records a run of 60).
func loadSeconds(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv("VKLLM_LOAD_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("VKLLM_LOAD_SECONDS=%q: want a positive number of seconds", v)
		}
		return time.Duration(n) * time.Second
	}
	return 3 * time.Second
}

// streamOutcome is how one streamed chat ended.
type streamOutcome struct {
	status  int
	done    bool // the stream ended with data: [DONE]
	err     string
	elapsed time.Duration
}

// streamChat sends one streamed chat and reads it to its end, within limit.
func streamChat(ts testServer, limit time.Duration) streamOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	body := `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":16,"stream":true}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return streamOutcome{err: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+ts.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return streamOutcome{err: err.Error(), elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	out := streamOutcome{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		var e apiError
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Message == "" {
			out.err = fmt.Sprintf("status %d without an error message", resp.StatusCode)
		}
		out.elapsed = time.Since(start)
		return out
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			out.done = true
			continue
		}
		var chunk chatResponse
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			out.err = fmt.Sprintf("event %q is not a chat chunk: %v", line, err)
		}
	}
	if err := sc.Err(); err != nil && out.err == "" {
		out.err = err.Error()
	}
	out.elapsed = time.Since(start)
	return out
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestConcurrentStreamsAllCompleteOrAreRefused runs 8 and then 32 clients that stream chats from
// the embedded model back to back, against a server in this process and against the real
// `vkllm serve` process: every stream ends with [DONE] or is a clear 503/429 with an error
// message, none takes longer than its 30 s limit (a hang), and memory does not grow with the
// number of streams served (the heap here, the resident set of the real process).
func TestConcurrentStreamsAllCompleteOrAreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("a load run of several seconds per case")
	}
	run := loadSeconds(t)
	t.Run("in-process", func(t *testing.T) {
		_, ts := newEngineServer(t)
		for _, clients := range []int{8, 32} {
			t.Run(fmt.Sprint(clients), func(t *testing.T) {
				loadRun(t, ts, clients, run, "heap", func() int64 { return int64(heapInUse()) })
			})
		}
	})
	t.Run("vkllm-serve", func(t *testing.T) {
		ts, pid := startRealServe(t)
		for _, clients := range []int{8, 32} {
			t.Run(fmt.Sprint(clients), func(t *testing.T) {
				loadRun(t, ts, clients, run, "RSS", func() int64 { return residentBytes(t, pid) })
			})
		}
	})
}

// startRealServe starts the vkllm binary's `serve --cpu` (the embedded model) and returns its
// address and token once it listens, and its process id.
func startRealServe(t *testing.T) (testServer, int) {
	t.Helper()
	bin := vkllmBinary(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	cmd := exec.Command(bin, "serve", "--cpu", "--listen", "127.0.0.1:0", "--token-file", tokenFile)
	cmd.Env = append(os.Environ(), "VKLLM_DATA_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if url, ok := strings.CutPrefix(lines.Text(), ListenPrefix); ok {
			go func() { // keep the pipe drained
				for lines.Scan() {
				}
			}()
			token, err := os.ReadFile(tokenFile)
			if err != nil {
				t.Fatal(err)
			}
			ts := testServer{base: url, token: strings.TrimSpace(string(token))}
			waitReady(t, ts)
			return ts, cmd.Process.Pid
		}
	}
	t.Fatalf("vkllm serve printed no %q line", ListenPrefix)
	return testServer{}, 0
}

// waitReady waits until the server's health says ready (the start-up model loaded).
func waitReady(t *testing.T, ts testServer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var h struct {
			Status string `json:"status"`
		}
		if ts.do(t, http.MethodGet, "/vkllm/health", "", &h) == http.StatusOK && h.Status == "ready" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("vkllm serve not ready within 60 s")
}

// residentBytes is a process's resident set (VmRSS).
func residentBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc/%d/status to read the resident set from (%v): this load run needs Linux", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// loadRun has clients stream chats back to back for run and checks how each ended.
func loadRun(t *testing.T, ts testServer, clients int, run time.Duration, memName string, mem func() int64) {
	t.Helper()
	const limit = 30 * time.Second
	memBefore := mem()
	var mu sync.Mutex
	var outcomes []streamOutcome
	var wg sync.WaitGroup
	stop := time.Now().Add(run)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				o := streamChat(ts, limit)
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	memAfter := mem()
	counts := map[string]int{}
	var latencies []time.Duration
	for _, o := range outcomes {
		switch {
		case o.err != "" || (o.status == http.StatusOK && !o.done):
			counts["failed"]++
			if counts["failed"] <= 3 {
				t.Errorf("stream: status %d, done %v, after %v: %s", o.status, o.done, o.elapsed, o.err)
			}
		case o.status == http.StatusOK:
			counts["complete"]++
		case o.status == http.StatusServiceUnavailable || o.status == http.StatusTooManyRequests:
			counts[fmt.Sprint(o.status)]++
		default:
			counts["failed"]++
			t.Errorf("stream: status %d, want 200, 503 or 429", o.status)
		}
		latencies = append(latencies, o.elapsed)
	}
	if counts["complete"] == 0 {
		t.Fatalf("no stream completed: %v", counts)
	}
	slices.Sort(latencies)
	p := func(q float64) float64 { return latencies[int(q*float64(len(latencies)-1))].Seconds() * 1000 }
	if growth := memAfter - memBefore; growth > 64<<20 {
		t.Errorf("%s grew by %d MB over %d streams", memName, growth>>20, len(outcomes))
	}
	t.Logf("%d clients for %v: %d streams (%v), %.1f streams/s, latency p50 %.0f ms p99 %.0f ms max %.0f ms, %s %d -> %d MB",
		clients, run, len(outcomes), counts, float64(len(outcomes))/run.Seconds(), p(0.5), p(0.99), p(1),
		memName, memBefore>>20, memAfter>>20)
}
