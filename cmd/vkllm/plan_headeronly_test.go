package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// TestPlanOfAHeaderOnlyFileSaysSo: `vkllm plan -m` of the first bytes of a download (the header
// and no weights) plans, and both the breakdown and the JSON say the file is header only.
func TestPlanOfAHeaderOnlyFileSaysSo(t *testing.T) {
	whole := modeltest.TinySynth(t, "", "llama", quant.Q8_0, 3)
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(whole)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "download.gguf.part")
	err = os.WriteFile(cut, b[:f.DataOffset], 0o644)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	flags, err := parsePlanFlags([]string{"-m", cut, "--assume-heap-mb", "8192"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p, notes, err := makePlan(t.Context(), flags)
	if err != nil {
		t.Fatalf("plan of a header-only file: %v", err)
	}
	var human, js bytes.Buffer
	if err := printPlan(&human, false, p, notes); err != nil {
		t.Fatal(err)
	}
	if err := printPlan(&js, true, p, notes); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(human.String(), "header only") || !strings.Contains(js.String(), `"header_only": true`) || !p.Verdict.Armed {
		t.Fatalf("armed %v; breakdown:\n%s\njson: %s", p.Verdict.Armed, human.String(), js.String())
	}
}
