//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sidecar

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO as the model path would block the open until a writer came, holding the queue: the
// plan and the load refuse it at once and say what it is.
func TestFIFOModelPathIsRefusedAtOnce(t *testing.T) {
	t.Setenv("VKLLM_DATA_DIR", t.TempDir())
	fifo := filepath.Join(t.TempDir(), "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	ts := startServer(t, ServeOptions{Load: engineLoad, Backend: "cpu"})
	path, _ := json.Marshal(fifo)
	cases := []struct{ route, body string }{
		{"/vkllm/plan", `{"model":` + string(path) + `}`},
		{"/vkllm/load", `{"path":` + string(path) + `}`},
	}
	client := &http.Client{Timeout: 2 * time.Second}
	for _, c := range cases {
		t.Run(c.route, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.base+c.route, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+ts.token)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("POST %s with a FIFO path: %v (no answer within 2s?)", c.route, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 422 || !strings.Contains(string(body), "named pipe") || !strings.Contains(string(body), "not a regular file") {
				t.Fatalf("POST %s: %d %s; want 422 saying it is a named pipe, not a regular file", c.route, resp.StatusCode, body)
			}
		})
	}
}
