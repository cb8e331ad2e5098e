package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestPlanFlagsRefuseBadCombinations(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"what-if without a heap", []string{"--assume-wddm"}, "--assume-heap-mb"},
		{"usage without a budget", []string{"--assume-heap-mb", "8192", "--assume-usage-mb", "100"}, "--assume-budget-mb"},
		{"budget above the heap", []string{"--assume-heap-mb", "8192", "--assume-budget-mb", "9000"}, "at most its heap"},
		{"zero pin", []string{"--vram-mb", "0"}, "positive number of MiB"},
		{"negative context", []string{"--ctx", "-1"}, "positive context"},
		{"stray argument", []string{"model.gguf"}, "after -m"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parsePlanFlags(tc.args, io.Discard)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := parsePlanFlags([]string{"--assume-heap-mb", "8192", "--assume-budget-mb", "8000", "--assume-usage-mb", "100"}, io.Discard); err != nil {
		t.Fatalf("a full what-if is refused: %v", err)
	}
}

func TestWhatIfPlanNeedsNoDevice(t *testing.T) {
	t.Setenv("VKLLM_GPU_VRAM_MB", "1")
	f, err := parsePlanFlags([]string{"--assume-heap-mb", "16303", "--assume-storage-range-mb", "4096"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, notes, err := makePlan(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("what-if plan took %v, want well under a second", el)
	}
	if !p.Verdict.Armed || p.UsableBytes != 12207<<20 || p.Device.MaxStorageBufferRange != 1<<32-1 || p.Pin.MB != 0 {
		t.Fatalf("usable %d range %d pin %+v: %s", p.UsableBytes, p.Device.MaxStorageBufferRange, p.Pin, p.Verdict.Text)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "VKLLM_GPU_VRAM_MB=1 is ignored") {
		t.Fatalf("notes %q, want one saying the env pin is ignored for a what-if device", notes)
	}
	var buf bytes.Buffer
	if err := printPlan(&buf, true, p, notes); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Verdict struct{ Text string } `json:"verdict"`
	}
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.Verdict.Text != p.Verdict.Text {
		t.Fatalf("--json output does not carry the verdict: %v\n%s", err, buf.String())
	}
}

func TestWhatIfPinAboveTheHeapIsRefused(t *testing.T) {
	f, err := parsePlanFlags([]string{"--assume-heap-mb", "4096", "--vram-mb", "5000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = makePlan(t.Context(), f)
	if err == nil || !strings.Contains(err.Error(), "pin at most 4096") {
		t.Fatalf("err = %v, want a refusal naming the most that can be pinned", err)
	}
	f.vramMB = 4000 // negative control: a pin inside the heap plans
	if p, _, err := makePlan(t.Context(), f); err != nil || p.Pin.MB != 4000 {
		t.Fatalf("pin 4000 on a 4096 MB heap: %v, pin %+v", err, p.Pin)
	}
}
