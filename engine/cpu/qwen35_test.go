package cpu

import (
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// loadHybrid loads synth's tiny preset of a Gated DeltaNet hybrid (3 recurrent layers, then
// gated attention).
func loadHybrid(t *testing.T, arch string) *model.Model {
	t.Helper()
	return modeltest.Load(t, modeltest.TinySynth(t, "", arch, quant.Q8_0, 5))
}

// hybridTokens is a sequence of n token ids inside the tiny presets' 512-token vocabulary.
func hybridTokens(n, salt int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 3 + (i*131+salt*17)%500
	}
	return out
}

// A recurrent state cannot drop positions as a KV cache does: a chat's later turn that starts
// before the end of the last (the common prefix of two turns) must give the logits a cold run
// of the same tokens gives. The steps walk a chat's pattern: a prompt, a second prompt after it,
// decode steps, then rewinds onto a snapshot, between snapshots, before every snapshot, and a
// rewind that continues with other tokens than before.
func TestQwen35RewindGivesTheLogitsOfAColdRun(t *testing.T) {
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		t.Run(arch, func(t *testing.T) {
			m := loadHybrid(t, arch)
			v := m.Hyper.VocabSize
			seq := hybridTokens(80, 1)
			other := hybridTokens(30, 2)
			cold := func(tokens []int) []float32 {
				r := newRunner(t, m, Options{Threads: 2, Context: 128})
				all, err := r.Eval(tokens, 0, true)
				if err != nil {
					t.Fatal(err)
				}
				return all
			}
			coldSeq := cold(seq)
			coldOther := cold(append(append([]int(nil), seq[:20]...), other...))

			warm := newRunner(t, m, Options{Threads: 2, Context: 128})
			steps := []struct {
				what     string
				tokens   []int
				pos      int
				want     []float32 // every position's logits of a cold run
				wantLast int       // the position whose logits the step must return
			}{
				{"first prompt", seq[:40], 0, coldSeq, 39},
				{"second prompt after it", seq[40:70], 40, coldSeq, 69},
				{"decode", seq[70:71], 70, coldSeq, 70},
				{"decode", seq[71:72], 71, coldSeq, 71},
				{"rewind between snapshots", seq[55:60], 55, coldSeq, 59},
				{"rewind onto the snapshot before a prompt's last token", seq[39:45], 39, coldSeq, 44},
				{"rewind before every snapshot", seq[10:12], 10, coldSeq, 11},
				{"continue after the rewind", seq[12:75], 12, coldSeq, 74},
				{"rewind and continue with other tokens", other, 20, coldOther, 49},
				{"decode after them", seq[50:51], 50, nil, 0},
			}
			for _, s := range steps {
				got, err := warm.Eval(s.tokens, s.pos, false)
				if err != nil {
					t.Fatalf("%s: %v", s.what, err)
				}
				if s.want == nil {
					continue
				}
				want := s.want[s.wantLast*v : (s.wantLast+1)*v]
				for j := range got {
					if got[j] != want[j] {
						t.Fatalf("%s (%d tokens at %d): logit %d is %v, a cold run's %v", s.what, len(s.tokens), s.pos, j, got[j], want[j])
					}
				}
			}
		})
	}
}

// The recurrence runs a prompt token by token inside each batch: a batched prompt and the same
// tokens one Eval at a time give the same logits bit for bit.
func TestQwen35BatchedPromptEqualsTokenByToken(t *testing.T) {
	m := loadHybrid(t, "qwen35")
	v := m.Hyper.VocabSize
	toks := hybridTokens(maxBatch+7, 3)
	all, err := newRunner(t, m, Options{Threads: 2, Context: 64}).Eval(toks, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	single := newRunner(t, m, Options{Threads: 1, Context: 64})
	for i, id := range toks {
		got, err := single.Eval([]int{id}, i, false)
		if err != nil {
			t.Fatal(err)
		}
		for j := range got {
			if got[j] != all[i*v+j] {
				t.Fatalf("token %d logit %d: one at a time %v, batched %v", i, j, got[j], all[i*v+j])
			}
		}
	}
}

// A partial offload hands the deeper blocks to another backend; the recurrent layers' state
// cannot be split so, and EvalLayers says so instead of leaving deeper layers stale. Every
// layer, the negative control, is accepted.
func TestQwen35EvalLayersRefusesAPartialStack(t *testing.T) {
	m := loadHybrid(t, "qwen35")
	r := newRunner(t, m, Options{Threads: 1, Context: 16})
	if _, err := r.EvalLayers([]int{1, 2}, 0, 2); err == nil || !strings.Contains(err.Error(), "recurrent") {
		t.Fatalf("2 of %d layers: err %v, want a refusal naming the recurrent layers", m.Hyper.Layers, err)
	}
	if _, err := r.EvalLayers([]int{1, 2}, 0, m.Hyper.Layers); err != nil {
		t.Fatalf("every layer: %v", err)
	}
}
