package engine

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/engine/sample"
)

// testdata/llamacpp-random.json holds llama.cpp's logits (node-llama-cpp 3.22.1 on the CPU,
// flash attention; regenerate with testdata/llamacpp-random.mjs) for random models of each
// architecture written by modeltest. It checks what the shared references cannot: NEOX RoPE,
// the qwen2 biases and the qwen3 Q/K norms against llama.cpp itself.
type llamacppCase struct {
	Arch   string       `json:"arch"`
	Type   string       `json:"type"`
	Seed   uint64       `json:"seed"`
	Tokens []int        `json:"tokens"`
	Logits [][2]float64 `json:"logits"` // [token id, logit], the top 8 first
}

// randomModelTolerance bounds |our logit - llama.cpp's| on logits of magnitude ~1-15. Measured:
// F32 llama/qwen2 ≤ 7e-5 and qwen3 1.3e-3 (the F32 matmuls sum in a different order, and after
// the Q/K norms a last-bit difference can round a query or key to the neighbouring f16 value);
// Q8_0 ≤ 5e-7, because the summation order there is llama.cpp's.
const randomModelTolerance = 5e-3

func TestRandomModelsMatchLlamaCpp(t *testing.T) {
	data, err := os.ReadFile("testdata/llamacpp-random.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []llamacppCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) != 6 {
		t.Fatalf("%d cases in the golden file, want 6", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Arch+"/"+c.Type, func(t *testing.T) {
			typ, err := quant.ParseType(c.Type)
			if err != nil {
				t.Fatal(err)
			}
			e, err := Load(context.Background(), LoadOptions{Path: writeRandom(t, modeltest.Small(c.Arch, typ, c.Seed)), Backend: BackendCPU, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			logits, err := e.Runner().Eval(c.Tokens, 0, false)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for _, p := range c.Logits {
				d := math.Abs(float64(logits[int(p[0])]) - p[1])
				worst = math.Max(worst, d)
				if d > randomModelTolerance {
					t.Errorf("token %d: logit %.6f, llama.cpp %.6f", int(p[0]), logits[int(p[0])], p[1])
				}
			}
			if got := sample.Argmax(logits); got != int(c.Logits[0][0]) {
				t.Errorf("argmax %d, llama.cpp %d", got, int(c.Logits[0][0]))
			}
			t.Logf("largest deviation from llama.cpp %.2g", worst)
		})
	}
}
