package cpu

import (
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

func TestRouteFollowsTheGatingNormalisationAndScale(t *testing.T) {
	logits := []float32{0.5, 2, -1, 1.5, 2, 0}
	soft := func(x []float64) []float64 {
		var s float64
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = math.Exp(v)
			s += out[i]
		}
		for i := range out {
			out[i] /= s
		}
		return out
	}
	all := make([]float64, len(logits))
	for i, v := range logits {
		all[i] = float64(v)
	}
	p := soft(all)
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	cases := []struct {
		name   string
		params model.MoEParams
		sel    []int
		w      []float64
	}{
		// experts 1 and 4 tie at 2: the lower index goes first
		{"softmax, renormalised", model.MoEParams{Used: 3, Gating: model.GatingSoftmax, NormWeights: true},
			[]int{1, 4, 3}, []float64{p[1] / (p[1] + p[4] + p[3]), p[4] / (p[1] + p[4] + p[3]), p[3] / (p[1] + p[4] + p[3])}},
		{"softmax, as is", model.MoEParams{Used: 2, Gating: model.GatingSoftmax}, []int{1, 4}, []float64{p[1], p[4]}},
		{"softmax, scaled", model.MoEParams{Used: 2, Gating: model.GatingSoftmax, WeightsScale: 2.5}, []int{1, 4}, []float64{2.5 * p[1], 2.5 * p[4]}},
		{"sigmoid", model.MoEParams{Used: 2, Gating: model.GatingSigmoid}, []int{1, 4}, []float64{sig(2), sig(2)}},
		{"sigmoid, renormalised", model.MoEParams{Used: 3, Gating: model.GatingSigmoid, NormWeights: true},
			[]int{1, 4, 3}, []float64{sig(2) / (2*sig(2) + sig(1.5)), sig(2) / (2*sig(2) + sig(1.5)), sig(1.5) / (2*sig(2) + sig(1.5))}},
		{"softmax over the selected", model.MoEParams{Used: 3, Gating: model.GatingSoftmaxSelected},
			[]int{1, 4, 3}, soft([]float64{2, 2, 1.5})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sel, w := make([]int, tc.params.Used), make([]float32, tc.params.Used)
			route(slices.Clone(logits), tc.params, sel, w)
			if !slices.Equal(sel, tc.sel) {
				t.Fatalf("selected %v, want %v", sel, tc.sel)
			}
			for j := range w {
				if math.Abs(float64(w[j])-tc.w[j]) > 1e-6 {
					t.Fatalf("weights %v, want %v", w, tc.w)
				}
			}
		})
	}
}

func TestTopKNeverPrefersNaN(t *testing.T) {
	sel := make([]int, 2)
	topK([]float32{float32(math.NaN()), 1, 3}, sel)
	if !slices.Equal(sel, []int{2, 1}) {
		t.Fatalf("selected %v, want [2 1]", sel)
	}
}

// synthMoE loads synth's tiny qwen3moe (8 experts, 2 used) in typ.
func synthMoE(t *testing.T, typ quant.Type) *model.Model {
	t.Helper()
	return modeltest.Load(t, modeltest.TinySynth(t, "", "qwen3moe", typ, 5))
}

// f32Matrix is a Matrix of random F32 weights (a shared expert the synth does not write).
func f32Matrix(rng *rand.Rand, name string, rows, cols int, scale float64) model.Matrix {
	vals := make([]float32, rows*cols)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64() * scale)
	}
	data, _ := quant.Quantize(quant.F32, vals)
	return model.Matrix{Name: name, Type: quant.F32, Rows: rows, Cols: cols, RowBytes: 4 * cols, Data: data}
}

func rowsOf(t *testing.T, m model.Matrix) [][]float64 {
	t.Helper()
	vals := make([]float32, m.Rows*m.Cols)
	if err := quant.Dequantize(m.Type, m.Data, vals); err != nil {
		t.Fatal(err)
	}
	out := make([][]float64, m.Rows)
	for r := range out {
		out[r] = make([]float64, m.Cols)
		for c := range out[r] {
			out[r][c] = float64(vals[r*m.Cols+c])
		}
	}
	return out
}

// naiveMoE is the block in float64 straight from its definition: for each token, softmax over
// the router's logits, the top Used experts, their weights renormalised, the sum of their SwiGLU
// FFNs so weighted, plus sigmoid(gating · x) times the shared expert's FFN.
func naiveMoE(t *testing.T, h model.Hyperparameters, l *model.Layer, x []float32, n int) []float64 {
	dim, p := h.Dim, h.MoE
	mv := func(w [][]float64, v []float64) []float64 {
		out := make([]float64, len(w))
		for r, row := range w {
			for c, a := range row {
				out[r] += a * v[c]
			}
		}
		return out
	}
	ffn := func(gate, up, down model.Matrix, v []float64) []float64 {
		g, u := mv(rowsOf(t, gate), v), mv(rowsOf(t, up), v)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		return mv(rowsOf(t, down), g)
	}
	out := make([]float64, n*dim)
	for i := 0; i < n; i++ {
		xi := x[i*dim : (i+1)*dim]
		var ss float64
		for _, v := range xi {
			ss += float64(v) * float64(v)
		}
		s := 1 / math.Sqrt(ss/float64(dim)+float64(h.NormEps))
		v := make([]float64, dim)
		for d := range v {
			v[d] = float64(xi[d]) * s * float64(l.FFNNorm.Values[d])
		}
		logits := mv(rowsOf(t, l.MoE.Router), v)
		order := make([]int, len(logits))
		for e := range order {
			order[e] = e
		}
		slices.SortStableFunc(order, func(a, b int) int { return -cmpFloat(logits[a], logits[b]) })
		var z, sum float64
		for _, lg := range logits {
			z += math.Exp(lg)
		}
		for _, e := range order[:p.Used] {
			sum += math.Exp(logits[e]) / z
		}
		o := out[i*dim : (i+1)*dim]
		for _, e := range order[:p.Used] {
			w := math.Exp(logits[e]) / z / sum
			y := ffn(l.MoE.Gate.Matrices[e], l.MoE.Up.Matrices[e], l.MoE.Down.Matrices[e], v)
			for d := range o {
				o[d] += w * y[d]
			}
		}
		if sh := l.MoE.Shared; sh != nil {
			g := mv(rowsOf(t, sh.Gating), v)[0]
			y := ffn(sh.Gate, sh.Up, sh.Down, v)
			for d := range o {
				o[d] += y[d] / (1 + math.Exp(-g))
			}
		}
		for d := range o {
			o[d] += float64(xi[d])
		}
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// The block over a batch (tokens grouped by expert) equals the float64 definition, with and
// without a shared expert: a wrong gather, scatter, weight or expert shows as an error of the
// order of the FFN's output, far above float32 rounding.
func TestMoEBlockMatchesItsDefinition(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := "routed only"
		if shared {
			name = "with a shared expert"
		}
		t.Run(name, func(t *testing.T) {
			m := synthMoE(t, quant.F32)
			h := m.Hyper
			rng := rand.New(rand.NewPCG(1, 2))
			if shared {
				const sff = 96
				for i := range m.Layers {
					m.Layers[i].MoE.Shared = &model.SharedExpert{
						Gate:   f32Matrix(rng, "gate_shexp", sff, h.Dim, 1/math.Sqrt(float64(h.Dim))),
						Up:     f32Matrix(rng, "up_shexp", sff, h.Dim, 1/math.Sqrt(float64(h.Dim))),
						Down:   f32Matrix(rng, "down_shexp", h.Dim, sff, 1/math.Sqrt(sff)),
						Gating: f32Matrix(rng, "gate_inp_shexp", 1, h.Dim, 1/math.Sqrt(float64(h.Dim))),
					}
				}
				m.Hyper.MoE.SharedFFN = sff
			}
			r := newRunner(t, m, Options{Threads: 2, Context: 64})
			const n = 9
			for i := range r.x[:n*h.Dim] {
				r.x[i] = float32(rng.NormFloat64())
			}
			x := slices.Clone(r.x[:n*h.Dim])
			l := &m.Layers[1]
			want := naiveMoE(t, m.Hyper, l, x, n)
			r.moe(l, n)
			var worst float64
			for i, w := range want {
				worst = max(worst, math.Abs(float64(r.x[i])-w))
			}
			if worst > 1e-4 {
				t.Fatalf("largest deviation from the float64 definition %.3g", worst)
			}
			t.Logf("largest deviation from the float64 definition %.2g", worst)
		})
	}
}

// A prompt evaluated as one batch gives the logits of the same tokens evaluated one at a time:
// the batch's grouping by expert changes which rows are multiplied together, never a result.
func TestMoEBatchedPromptEqualsTokenByToken(t *testing.T) {
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			m := synthMoE(t, typ)
			tokens := []int{1, 300, 301, 302, 303, 304, 305, 310, 320, 330, 340, 350}
			batched := newRunner(t, m, Options{Threads: 2, Context: 64})
			all, err := batched.Eval(tokens, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			single := newRunner(t, m, Options{Threads: 2, Context: 64})
			v := m.Hyper.VocabSize
			for i, tok := range tokens {
				got, err := single.Eval([]int{tok}, i, false)
				if err != nil {
					t.Fatal(err)
				}
				for j, g := range got {
					if d := math.Abs(float64(g - all[i*v+j])); d > 1e-4 {
						t.Fatalf("token %d, logit %d: one at a time %.6f, batched %.6f", i, j, g, all[i*v+j])
					}
				}
			}
		})
	}
}

// The router margin is the k-th largest logit less the (k+1)-th, NaN counted as the smallest;
// after an Eval of a mixture-of-experts model the runner reports the smallest over its tokens
// and layers (positive and finite on random weights).
func TestRouterMarginIsTheGapAfterTheLastSelected(t *testing.T) {
	for _, tc := range []struct {
		logits []float32
		k      int
		want   float32
	}{
		{[]float32{0.5, 3, 1, 2.5, 2}, 2, 0.5},
		{[]float32{0.5, 3, 1, 2.5, 2}, 1, 0.5},
		{[]float32{0.5, 3, 1, 2.5, 2}, 4, 0.5},
		{[]float32{1, 2, 2, 0}, 1, 0},
		{[]float32{float32(math.NaN()), 1, 3}, 2, float32(math.Inf(1))},
	} {
		if got := routerMargin(tc.logits, tc.k); got != tc.want {
			t.Errorf("routerMargin(%v, %d) = %v, want %v", tc.logits, tc.k, got, tc.want)
		}
	}
	m := synthMoE(t, quant.Q8_0)
	r, err := New(m, Options{Threads: 1, Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Eval([]int{1, 262, 300, 275}, 0, false); err != nil {
		t.Fatal(err)
	}
	if g := r.RouterMargin(); !(g > 0 && g < 100) {
		t.Fatalf("router margin %v after a mixture-of-experts Eval, want a positive gap", g)
	}
}
