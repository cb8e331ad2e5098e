package cpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// loadLayers is the seed's random Q8_0 model of arch with three layers.
func loadLayers(t *testing.T, arch string, seed uint64) *model.Model {
	s := modeltest.Small(arch, quant.Q8_0, seed)
	s.Layers = 3
	return loadRandom(t, s)
}

// truncated is m with only its first k layers: its Eval is what a pass through blocks
// 0..k-1 followed by the head must give.
func truncated(m *model.Model, k int) *model.Model {
	mk := *m
	mk.Layers = m.Layers[:k]
	mk.Hyper.Layers = k
	return &mk
}

func tokensOf(n, vocab int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i*37 + 1) % vocab
	}
	return out
}

func equalBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: value %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// Through every block and the head, EvalLayers gives Eval's logits bit for bit, over a prompt
// spanning two batches and a decode step that reads the cache; through the first k blocks it
// gives the hidden states whose head is the logits of the model cut to those k layers.
func TestEvalLayersThenHeadEqualsEvalBitForBit(t *testing.T) {
	for _, arch := range archs {
		t.Run(arch, func(t *testing.T) {
			m := loadLayers(t, arch, 11)
			L, vocab := m.Hyper.Layers, m.Hyper.VocabSize
			prompt := tokensOf(maxBatch+5, vocab)
			for k := 0; k <= L; k++ {
				ref := newRunner(t, truncated(m, k), Options{Threads: 2})
				r := newRunner(t, m, Options{Threads: 2})
				want, err := ref.Eval(prompt, 0, true)
				if err != nil {
					t.Fatal(err)
				}
				hidden, err := r.EvalLayers(prompt, 0, k)
				if err != nil {
					t.Fatal(err)
				}
				if len(hidden) != len(prompt)*m.Hyper.Dim {
					t.Fatalf("%d layers: %d hidden values for %d tokens of %d", k, len(hidden), len(prompt), m.Hyper.Dim)
				}
				got, err := r.Head(hidden)
				if err != nil {
					t.Fatal(err)
				}
				equalBits(t, fmt.Sprintf("prompt through %d layers", k), got, want)

				next := len(prompt)
				want, err = ref.Eval([]int{7}, next, false)
				if err != nil {
					t.Fatal(err)
				}
				if hidden, err = r.EvalLayers([]int{7}, next, k); err != nil {
					t.Fatal(err)
				}
				if got, err = r.Head(hidden); err != nil {
					t.Fatal(err)
				}
				equalBits(t, fmt.Sprintf("decode through %d layers", k), got, want)
			}
		})
	}
}

// The layer count matters (negative control for the test above): the hidden states after one
// block differ from those after two, and after none they are the token embeddings.
func TestEvalLayersStopsAfterTheRequestedBlock(t *testing.T) {
	m := loadLayers(t, "llama", 12)
	toks := []int{1, 260, 300}
	var outs [][]float32
	for k := 0; k <= 2; k++ {
		r := newRunner(t, m, Options{Threads: 1})
		h, err := r.EvalLayers(toks, 0, k)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, h)
	}
	dim := m.Hyper.Dim
	emb := make([]float32, dim)
	for i, id := range toks {
		if err := quant.Dequantize(m.TokenEmbd.Type, m.TokenEmbd.Row(id), emb); err != nil {
			t.Fatal(err)
		}
		equalBits(t, fmt.Sprintf("token %d after no layers", i), outs[0][i*dim:(i+1)*dim], emb)
	}
	for k := 1; k <= 2; k++ {
		same := 0
		for i := range outs[k] {
			if outs[k][i] == outs[k-1][i] {
				same++
			}
		}
		if same == len(outs[k]) {
			t.Fatalf("hidden states after %d layers equal those after %d", k, k-1)
		}
	}
}

// EvalLayers keeps Eval's cache rules for its blocks: a rewind recomputes from that position
// and drops the later ones, and deeper blocks, never filled, hold no position an Eval could
// continue from.
func TestEvalLayersRewindsAndCachesOnlyItsBlocks(t *testing.T) {
	m := loadLayers(t, "qwen3", 13)
	r := newRunner(t, m, Options{Threads: 2, Context: 16})
	first, err := r.EvalLayers([]int{1, 270, 271, 272}, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.EvalLayers([]int{280, 281}, 4, 2); err != nil {
		t.Fatal(err)
	}
	again, err := r.EvalLayers([]int{272}, 3, 2) // rewind over the last prompt token
	if err != nil {
		t.Fatal(err)
	}
	dim := m.Hyper.Dim
	equalBits(t, "last prompt token after rewind", again, first[3*dim:])
	if _, err := r.EvalLayers([]int{281}, 5, 2); err == nil || !strings.Contains(err.Error(), "outside the 4 cached positions") {
		t.Fatalf("position 5 after a rewind to 3: error %v, want the 4 cached positions named", err)
	}
	if _, err := r.EvalLayers([]int{281}, 4, 1); err != nil {
		t.Fatalf("fewer blocks over the cached positions: %v", err)
	}
	if _, err := r.Eval([]int{281}, 1, false); err == nil || !strings.Contains(err.Error(), "outside the 0 cached positions") {
		t.Fatalf("Eval past the unfilled third block: error %v, want the 0 cached positions named", err)
	}
	if _, err := r.Eval([]int{1, 270}, 0, false); err != nil {
		t.Fatalf("Eval from position 0 after EvalLayers: %v", err)
	}
}

func TestEvalLayersAndHeadRejectBadInput(t *testing.T) {
	m := loadLayers(t, "llama", 14)
	r := newRunner(t, m, Options{Threads: 1, Context: 8})
	dim := m.Hyper.Dim
	cases := []struct {
		name string
		run  func() error
		want string
	}{
		{"negative layer count", func() error { _, err := r.EvalLayers([]int{1}, 0, -1); return err }, "-1 layers requested of the model's 3"},
		{"more layers than the model", func() error { _, err := r.EvalLayers([]int{1}, 0, 4); return err }, "4 layers requested of the model's 3"},
		{"no tokens", func() error { _, err := r.EvalLayers(nil, 0, 1); return err }, "no tokens"},
		{"token beyond vocabulary", func() error { _, err := r.EvalLayers([]int{100000}, 0, 1); return err }, "outside the vocabulary"},
		{"position beyond the cache", func() error { _, err := r.EvalLayers([]int{1}, 2, 1); return err }, "outside the 0 cached positions"},
		{"context overflow", func() error { _, err := r.EvalLayers(make([]int, 9), 0, 1); return err }, "exceed the context of 8"},
		{"no hidden states", func() error { _, err := r.Head(nil); return err }, "0 hidden values are not whole rows"},
		{"a partial row", func() error { _, err := r.Head(make([]float32, dim+1)); return err }, "not whole rows of 256"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
