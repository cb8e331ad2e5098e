package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/store"
)

func TestPinSetRefusesANonPositiveSize(t *testing.T) {
	for _, mb := range []string{"0", "-5"} {
		err := runPinSet(t.Context(), []string{"--mb", mb}, &bytes.Buffer{})
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "positive") {
			t.Fatalf("--mb %s: err = %v, want a usage error asking for a positive size", mb, err)
		}
	}
}

func TestCheckPinFitsTheHeap(t *testing.T) {
	dev := plan.Device{Index: 0, Name: "gpu", HeapBytes: 8192 * plan.MiB}
	tests := []struct {
		mb   int
		want string // "" accepts
	}{
		{8192, ""},
		{1, ""},
		{8193, "pin at most 8192"},
		{0, "must be positive"},
		{-1, "must be positive"},
	}
	for _, tc := range tests {
		err := checkPinFits(tc.mb, dev, "pin")
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkPinFits(%d) = %v, want %q", tc.mb, err, tc.want)
		}
	}
}

func TestPinListAndClearByKeyUseTheStore(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("VKLLM_DATA_DIR", dir)
	t.Setenv("VKLLM_GPU_VRAM_MB", "")
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetPin(t.Context(), "10de:2330:abcd", 7000); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var out bytes.Buffer
	if err := runPinList(t.Context(), nil, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "10de:2330:abcd") || !strings.Contains(out.String(), "7000 MB") {
		t.Fatalf("pin list:\n%s", out.String())
	}
	out.Reset()
	if err := runPinClear(t.Context(), []string{"--key", "10de:2330:abcd"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "cleared the 7000 MB pin") {
		t.Fatalf("pin clear:\n%s", out.String())
	}
	out.Reset()
	t.Setenv("VKLLM_GPU_VRAM_MB", "900")
	if err := runPinList(t.Context(), nil, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no pins") || !strings.Contains(out.String(), "VKLLM_GPU_VRAM_MB=900 is set and overrides") {
		t.Fatalf("pin list after clear:\n%s", out.String())
	}
}
