package cpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

var archs = []string{"llama", "qwen2", "qwen3"}

func loadRandom(t testing.TB, s modeltest.Spec) *model.Model {
	t.Helper()
	data, err := modeltest.Bytes(s)
	if err != nil {
		t.Fatal(err)
	}
	return modeltest.LoadBytes(t, fmt.Sprintf("%s-%s.gguf", s.Arch, s.Type), data)
}

func newRunner(t testing.TB, m *model.Model, opts Options) *Runner {
	t.Helper()
	r, err := New(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// naiveForward is an independent, deliberately plain float64 implementation of the three
// architectures over a whole sequence (weights dequantized in full, no cache, no batching), the
// yardstick for the runner's bookkeeping: GQA head mapping, RoPE pairing, causal masking, biases,
// Q/K norms, tied heads. It returns the logits of every position.
func naiveForward(t testing.TB, m *model.Model, tokens []int) [][]float64 {
	h := m.Hyper
	deq := func(w model.Matrix) [][]float64 {
		vals := make([]float32, w.Rows*w.Cols)
		if err := quant.Dequantize(w.Type, w.Data, vals); err != nil {
			t.Fatal(err)
		}
		out := make([][]float64, w.Rows)
		for r := range out {
			out[r] = make([]float64, w.Cols)
			for c := range out[r] {
				out[r][c] = float64(vals[r*w.Cols+c])
			}
		}
		return out
	}
	mv := func(w [][]float64, x []float64) []float64 {
		out := make([]float64, len(w))
		for r, row := range w {
			for c, v := range row {
				out[r] += v * x[c]
			}
		}
		return out
	}
	norm := func(x []float64, w []float32) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		s := 1 / math.Sqrt(ss/float64(len(x))+float64(h.NormEps))
		out := make([]float64, len(x))
		for i := range x {
			out[i] = x[i] * s * float64(w[i])
		}
		return out
	}
	rot := func(v []float64, pos int) {
		for head := 0; head < len(v)/h.HeadDim; head++ {
			x := v[head*h.HeadDim : (head+1)*h.HeadDim]
			for i := 0; i < h.Rope.Dims/2; i++ {
				theta := float64(pos) * math.Pow(float64(h.Rope.FreqBase), -2*float64(i)/float64(h.Rope.Dims))
				a, b := 2*i, 2*i+1
				if h.Rope.Kind == model.RopeNeoX {
					a, b = i, i+h.Rope.Dims/2
				}
				x0, x1 := x[a], x[b]
				x[a] = x0*math.Cos(theta) - x1*math.Sin(theta)
				x[b] = x0*math.Sin(theta) + x1*math.Cos(theta)
			}
		}
	}
	emb := deq(m.TokenEmbd)
	xs := make([][]float64, len(tokens))
	for i, id := range tokens {
		xs[i] = append([]float64(nil), emb[id]...)
	}
	for _, l := range m.Layers {
		wq, wk, wv, wo := deq(l.Q), deq(l.K), deq(l.V), deq(l.O)
		wg, wu, wd := deq(l.Gate), deq(l.Up), deq(l.Down)
		ks, vs := make([][]float64, len(tokens)), make([][]float64, len(tokens))
		qs := make([][]float64, len(tokens))
		for i := range tokens {
			xn := norm(xs[i], l.AttnNorm.Values)
			q, k, v := mv(wq, xn), mv(wk, xn), mv(wv, xn)
			for j := range q {
				if l.QBias.Present() {
					q[j] += float64(l.QBias.Values[j])
				}
			}
			for j := range k {
				if l.KBias.Present() {
					k[j] += float64(l.KBias.Values[j])
					v[j] += float64(l.VBias.Values[j])
				}
			}
			if l.QNorm.Present() {
				for hh := 0; hh < h.Heads; hh++ {
					copy(q[hh*h.HeadDim:], norm(q[hh*h.HeadDim:(hh+1)*h.HeadDim], l.QNorm.Values))
				}
				for hh := 0; hh < h.HeadsKV; hh++ {
					copy(k[hh*h.HeadDim:], norm(k[hh*h.HeadDim:(hh+1)*h.HeadDim], l.KNorm.Values))
				}
			}
			rot(q, i)
			rot(k, i)
			qs[i], ks[i], vs[i] = q, k, v
		}
		for i := range tokens {
			att := make([]float64, h.Heads*h.ValueDim)
			for hh := 0; hh < h.Heads; hh++ {
				kvh := hh * h.HeadsKV / h.Heads
				sc := make([]float64, i+1)
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					for d := 0; d < h.HeadDim; d++ {
						sc[j] += qs[i][hh*h.HeadDim+d] * ks[j][kvh*h.HeadDim+d]
					}
					sc[j] /= math.Sqrt(float64(h.HeadDim))
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for d := 0; d < h.ValueDim; d++ {
						att[hh*h.ValueDim+d] += sc[j] / sum * vs[j][kvh*h.ValueDim+d]
					}
				}
			}
			o := mv(wo, att)
			for d := range o {
				xs[i][d] += o[d]
			}
			xn := norm(xs[i], l.FFNNorm.Values)
			g, u := mv(wg, xn), mv(wu, xn)
			for d := range g {
				g[d] = g[d] / (1 + math.Exp(-g[d])) * u[d]
			}
			down := mv(wd, g)
			for d := range down {
				xs[i][d] += down[d]
			}
		}
	}
	out := deq(m.Output)
	logits := make([][]float64, len(tokens))
	for i := range tokens {
		logits[i] = mv(out, norm(xs[i], m.OutputNorm.Values))
	}
	return logits
}

// maxRelErr is max |got-want| over the row divided by max |want|.
func maxRelErr(got []float32, want []float64) float64 {
	var maxDiff, maxAbs float64
	for i, w := range want {
		maxDiff = math.Max(maxDiff, math.Abs(float64(got[i])-w))
		maxAbs = math.Max(maxAbs, math.Abs(w))
	}
	return maxDiff / maxAbs
}

// rmsRelErr is the root-mean-square of got-want divided by the root-mean-square of want.
func rmsRelErr(got []float32, want []float64) float64 {
	var d2, w2 float64
	for i, w := range want {
		d := float64(got[i]) - w
		d2 += d * d
		w2 += w * w
	}
	return math.Sqrt(d2 / w2)
}

var testTokens = []int{1, 259, 260, 261, 262, 300, 5, 17}

func TestForwardMatchesNaiveFloat64Reference(t *testing.T) {
	for _, arch := range archs {
		for _, tied := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s tied=%v", arch, tied), func(t *testing.T) {
				s := modeltest.Small(arch, quant.F32, 3)
				s.Tied = tied
				m := loadRandom(t, s)
				want := naiveForward(t, m, testTokens)
				r := newRunner(t, m, Options{Threads: 2, KV: KVF32})
				got, err := r.Eval(testTokens, 0, true)
				if err != nil {
					t.Fatal(err)
				}
				v := m.Hyper.VocabSize
				for i := range testTokens {
					// float32 accumulation over rows of 256: ~1e-6 relative
					if e := maxRelErr(got[i*v:(i+1)*v], want[i]); e > 1e-4 {
						t.Fatalf("position %d: relative error %.2g vs the float64 reference", i, e)
					}
				}
			})
		}
	}
}

func TestBatchedPrefillEqualsTokenByToken(t *testing.T) {
	m := loadRandom(t, modeltest.Small("qwen2", quant.Q8_0, 5))
	batched := newRunner(t, m, Options{Threads: 2})
	single := newRunner(t, m, Options{Threads: 1})
	// longer than maxBatch so the prompt spans two batches
	toks := make([]int, maxBatch+5)
	for i := range toks {
		toks[i] = (i*37 + 1) % m.Hyper.VocabSize
	}
	all, err := batched.Eval(toks, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	v := m.Hyper.VocabSize
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

func TestEvalAfterRewindRecomputesFromThatPosition(t *testing.T) {
	m := loadRandom(t, modeltest.Small("llama", quant.Q4_K, 6))
	r := newRunner(t, m, Options{Threads: 2})
	first, err := r.Eval([]int{1, 270, 271, 272}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Eval([]int{280, 281}, 4, false); err != nil {
		t.Fatal(err)
	}
	again, err := r.Eval([]int{272}, 3, false) // rewind over the last prompt token
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if first[i] != again[i] {
			t.Fatalf("logit %d after rewind %v, first time %v", i, again[i], first[i])
		}
	}
	r.Reset()
	fresh, err := r.Eval([]int{1, 270, 271, 272}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if fresh[0] != first[0] {
		t.Fatalf("after Reset logits differ: %v vs %v", fresh[0], first[0])
	}
}

func TestEvalRejectsBadInput(t *testing.T) {
	m := loadRandom(t, modeltest.Small("llama", quant.F16, 7))
	r := newRunner(t, m, Options{Threads: 1, Context: 8})
	cases := []struct {
		name   string
		tokens []int
		pos    int
		want   string
	}{
		{"no tokens", nil, 0, "no tokens"},
		{"token beyond vocabulary", []int{1, 100000}, 0, "outside the vocabulary"},
		{"negative token", []int{-1}, 0, "outside the vocabulary"},
		{"position beyond the cache", []int{1}, 3, "outside the 0 cached positions"},
		{"context overflow", make([]int, 9), 0, "exceed the context of 8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Eval(tc.tokens, tc.pos, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// quantTolerance bounds the relative RMS logit error (see rmsRelErr) between a model and its
// F32 twin (same seed): the weights' own quantization error, plus the activation quantization
// llama.cpp also applies, compounded over two random layers. Measured values on these models
// are about half of each bound (Q4_0 ~0.25, Q2_K ~0.75). An unrelated model scores ~1.4
// (TestDifferentSeedIsFarFromF32 is the negative control).
var quantTolerance = map[quant.Type]float64{
	quant.F32:  1e-6,
	quant.F16:  0.003,
	quant.Q8_0: 0.05,
	quant.Q6_K: 0.1,
	quant.Q5_0: 0.25,
	quant.Q5_1: 0.25,
	quant.Q5_K: 0.25,
	quant.Q4_0: 0.45,
	quant.Q4_1: 0.45,
	quant.Q4_K: 0.45,
	quant.Q3_K: 0.7,
	quant.Q2_K: 1.0,
}

var allTypes = []quant.Type{quant.F32, quant.F16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q2_K, quant.Q3_K}

func TestEveryArchitectureAndTypeRunsCloseToF32(t *testing.T) {
	toks := []int{1, 262, 263, 264, 265}
	for _, arch := range archs {
		ref := loadRandom(t, modeltest.Small(arch, quant.F32, 9))
		rr := newRunner(t, ref, Options{Threads: 2})
		want, err := rr.Eval(toks, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		want64 := make([]float64, len(want))
		for i, v := range want {
			want64[i] = float64(v)
		}
		for _, typ := range allTypes {
			t.Run(arch+"/"+typ.String(), func(t *testing.T) {
				m := loadRandom(t, modeltest.Small(arch, typ, 9))
				r := newRunner(t, m, Options{Threads: 2})
				got, err := r.Eval(toks, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range got {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("logit %d is %v", i, v)
					}
				}
				e := rmsRelErr(got, want64)
				t.Logf("%s %s: relative error %.4f vs F32", arch, typ, e)
				if e > quantTolerance[typ] {
					t.Fatalf("relative error %.4f vs the F32 model exceeds %.4f", e, quantTolerance[typ])
				}
			})
		}
	}
}

func TestQuantizedForwardMatchesDequantizedReference(t *testing.T) {
	toks := testTokens[:5]
	for _, typ := range allTypes {
		t.Run(typ.String(), func(t *testing.T) {
			m := loadRandom(t, modeltest.Small("llama", typ, 4))
			want := naiveForward(t, m, toks)
			r := newRunner(t, m, Options{Threads: 2, KV: KVF32})
			got, err := r.Eval(toks, 0, false)
			if err != nil {
				t.Fatal(err)
			}
			e := rmsRelErr(got, want[len(toks)-1])
			t.Logf("%s: relative RMS error %.5f vs the float64 forward on dequantized weights", typ, e)
			if e > activationTolerance[typ] {
				t.Fatalf("relative RMS error %.5f exceeds %.5f", e, activationTolerance[typ])
			}
		})
	}
}

func TestF16CacheStaysCloseToF32Cache(t *testing.T) {
	m := loadRandom(t, modeltest.Small("qwen3", quant.F32, 12))
	a := newRunner(t, m, Options{Threads: 2, KV: KVF16})
	b := newRunner(t, m, Options{Threads: 2, KV: KVF32})
	x, err := a.Eval(testTokens, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	y, err := b.Eval(testTokens, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	y64 := make([]float64, len(y))
	for i, v := range y {
		y64[i] = float64(v)
	}
	// f16 keeps 11 significant bits: ~5e-4 relative per value
	if e := maxRelErr(x, y64); e > 0.01 || e == 0 {
		t.Fatalf("f16 vs f32 cache relative error %.2g, want (0, 0.01]", e)
	}
}

func TestNewRejectsUnknownKVType(t *testing.T) {
	m := loadRandom(t, modeltest.Small("llama", quant.F32, 1))
	if _, err := New(m, Options{KV: "q8"}); err == nil || !strings.Contains(err.Error(), "q8") {
		t.Fatalf("New with KV q8: %v", err)
	}
}

// activationTolerance bounds the relative RMS logit error of the runner against the float64
// forward on the same (dequantized) weights: all that differs is the activations' own
// quantization before the dot products (8-bit blocks for the Q types, f16 for F16 weights).
// Measured: 4e-4 for F16, 1.1-1.3% for the Q8_0/Q8_1-activation types, 1.4-1.9% for the
// K-quants (Q8_K activations over 256-element blocks).
var activationTolerance = map[quant.Type]float64{
	quant.F32:  1e-5,
	quant.F16:  0.002,
	quant.Q8_0: 0.025,
	quant.Q4_0: 0.025,
	quant.Q4_1: 0.025,
	quant.Q5_0: 0.025,
	quant.Q5_1: 0.025,
	quant.Q2_K: 0.04,
	quant.Q3_K: 0.04,
	quant.Q4_K: 0.04,
	quant.Q5_K: 0.04,
	quant.Q6_K: 0.04,
}

func TestDifferentSeedIsFarFromF32(t *testing.T) {
	toks := []int{1, 262, 263, 264, 265}
	a := newRunner(t, loadRandom(t, modeltest.Small("llama", quant.F32, 9)), Options{Threads: 2})
	b := newRunner(t, loadRandom(t, modeltest.Small("llama", quant.F32, 10)), Options{Threads: 2})
	x, err := a.Eval(toks, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	y, err := b.Eval(toks, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	x64 := make([]float64, len(x))
	for i, v := range x {
		x64[i] = float64(v)
	}
	if e := rmsRelErr(y, x64); e < 1.1 {
		t.Fatalf("an unrelated model scored %.3f, within the quantized models' bounds", e)
	}
}
