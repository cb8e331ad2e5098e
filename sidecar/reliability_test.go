package sidecar

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// send makes one authorized request with the body read from r and returns the status, the
// response body and how long the answer took.
func (ts testServer) send(t *testing.T, method, path string, r io.Reader) (int, string, time.Duration) {
	t.Helper()
	req, err := http.NewRequest(method, ts.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ts.token)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), time.Since(start)
}

func (ts testServer) sendString(t *testing.T, method, path, body string) (int, string, time.Duration) {
	t.Helper()
	return ts.send(t, method, path, strings.NewReader(body))
}
