package main

import (
	"strings"
	"testing"

	"github.com/vkllm/vkllm/app"
)

func TestBrowserModeListensOnLoopbackOnly(t *testing.T) {
	cases := []struct {
		listen  string
		wantErr string
	}{
		{"127.0.0.1:0", ""},
		{"[::1]:8080", ""},
		{"localhost:9000", ""},
		{"0.0.0.0:8080", "only listens on loopback"},
		{"192.168.1.5:8080", "only listens on loopback"},
		{":8080", "only listens on loopback"},
		{"127.0.0.1", "want host:port"},
	}
	for _, c := range cases {
		err := checkLoopback(c.listen)
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("checkLoopback(%q) = %v, want %q", c.listen, err, c.wantErr)
		}
	}
}

func TestSwitchEmitterDeliversOnlyOnceAShellIsSet(t *testing.T) {
	var em switchEmitter
	em.Emit("chat:delta", 1) // before a shell: dropped, no panic
	var got []string
	em.set(app.EmitterFunc(func(name string, _ any) { got = append(got, name) }))
	em.Emit("engine:event", 2)
	if len(got) != 1 || got[0] != "engine:event" {
		t.Fatalf("delivered %v, want only the event sent after set", got)
	}
}
