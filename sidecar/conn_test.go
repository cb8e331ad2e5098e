package sidecar

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawRequest sends one HTTP/1.1 request on c and reads its response.
func rawRequest(t *testing.T, c net.Conn, br *bufio.Reader, host, path, token string) *http.Response {
	t.Helper()
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n"
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatalf("write request: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// closedWithin reports how long the server took to close c (reading nothing), or fails after max.
func closedWithin(t *testing.T, c net.Conn, br *bufio.Reader, max time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(max))
	_, err := br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v", max)
	}
	if err == nil {
		t.Fatal("the server sent more bytes, want the connection closed")
	}
	return time.Since(start)
}

func TestConnectionsAreClosedWhenIdleAndAfterA401(t *testing.T) {
	const timeout = 300 * time.Millisecond
	load, _ := newFakeLoader(time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load, ReadHeaderTimeout: timeout, IdleTimeout: timeout})
	host := strings.TrimPrefix(ts.base, "http://")
	for _, tc := range []struct {
		name      string
		request   bool   // send one request first
		token     string // for that request
		wantCode  int
		wantClose bool // the response says Connection: close
	}{
		{name: "keep-alive after an authorized request", request: true, token: ts.token, wantCode: 200},
		{name: "after a 401", request: true, token: "wrong-token-wrong-token", wantCode: 401, wantClose: true},
		{name: "after a 401 without a token", request: true, wantCode: 401, wantClose: true},
		{name: "connected, never sends a header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			if tc.request {
				resp := rawRequest(t, c, br, host, "/vkllm/health", tc.token)
				if resp.StatusCode != tc.wantCode || resp.Close != tc.wantClose {
					t.Fatalf("response %d, close %v; want %d, close %v", resp.StatusCode, resp.Close, tc.wantCode, tc.wantClose)
				}
			}
			max := timeout + 3*time.Second
			took := closedWithin(t, c, br, max)
			if tc.wantClose && took > timeout/2 {
				t.Errorf("closed %v after the 401, want at once", took)
			}
		})
	}
}

func TestConnectionCapMakesNewConnectionsWaitForAFreeSlot(t *testing.T) {
	const timeout = 400 * time.Millisecond
	load, _ := newFakeLoader(time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load, ReadHeaderTimeout: timeout, IdleTimeout: timeout, MaxConns: 2})
	host := strings.TrimPrefix(ts.base, "http://")
	// startServer's health polling may have left a keep-alive connection; let it time out.
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(timeout + 100*time.Millisecond)
	for range 2 {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	time.Sleep(50 * time.Millisecond) // both accepted: the cap is reached
	start := time.Now()
	var h Health
	if code := ts.do(t, "GET", "/vkllm/health", "", &h); code != 200 || h.Status != "ready" {
		t.Fatalf("health behind two silent connections: %d %+v", code, h)
	}
	took := time.Since(start)
	// The request waits for a slot (about timeout less the 50 ms), yet is served once the silent
	// connections time out.
	if took < timeout/2 || took > timeout+3*time.Second {
		t.Fatalf("authorized request answered after %v with the cap full, want after the silent connections' %v timeout", took, timeout)
	}
}
