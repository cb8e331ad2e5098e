package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/engine/sharedtest"
)

type refCase struct {
	Prompt       string         `json:"prompt"`
	PromptTokens []int          `json:"prompt_tokens"`
	Generated    []int          `json:"generated"`
	Text         string         `json:"text"`
	Top5         [][][2]float64 `json:"top5_logits"`
}

func readCases(t *testing.T, path string) []refCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []refCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var c refCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// firstStepTolerance is the largest |our logit - llama.cpp's| allowed on the reference's top-5
// tokens at the first generated step. f32/f16 weights: float accumulation order (measured
// ≤ 0.007 on logits of ~15-20, from summation order in the f16 attention and matmuls). Q8_0/Q4_0:
// the activations are quantized to 8 bits before every matmul, so a last-bit difference anywhere
// upstream can round a value the other way; with llama.cpp's summation order reproduced we
// agree to 1e-4 on most prompts, but llama.cpp itself (node-llama-cpp 3.22.1, CPU, flash
// attention) differs from this reference by up to 0.077 on two q8_0 prompts, which bounds what
// any faithful engine can promise.
var firstStepTolerance = map[string]float64{
	"stories260K":     0.01,
	"rand-llama-f32":  0.01,
	"rand-llama-f16":  0.01,
	"rand-llama-q8_0": 0.1,
	"rand-llama-q4_0": 0.1,
}

// nearTie is the reference top-2 logit gap under which two correct engines may pick either token.
const nearTie = 0.05

func TestGreedyGenerationMatchesLlamaCpp(t *testing.T) {
	shared := sharedtest.Path(t)
	for _, name := range []string{"stories260K", "rand-llama-f32", "rand-llama-f16", "rand-llama-q8_0", "rand-llama-q4_0"} {
		t.Run(name, func(t *testing.T) {
			e, err := Load(context.Background(), LoadOptions{Path: filepath.Join(shared, "models", name+".gguf"), Backend: BackendCPU, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			// Logits are held at the first step, where firstStepTolerance was measured.
			compareWithReference(t, e, readCases(t, filepath.Join(shared, "reference", "generation", name+".jsonl")), firstStepTolerance[name], nearTie, true)
		})
	}
}
