package vulkan

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/shaders"
)

// iqModelTypes are assigned to the random llama model's matrices in turn (token embedding,
// then each layer's q, k, v, o, gate, up, down, then the head), so every type serves at least
// once and the products sharing one input (q/k/v, gate/up) mix Q8_0- and Q8_K-rounded
// activations: IQ4_NL and MXFP4 pair with Q8_0, the others with Q8_K.
var iqModelTypes = []quant.Type{quant.IQ4_NL, quant.IQ2_XXS, quant.MXFP4, quant.IQ3_S, quant.IQ4_XS, quant.IQ2_XS,
	quant.IQ3_XXS, quant.IQ2_S, quant.IQ1_S, quant.IQ1_M}

// iqMixedModel writes and loads a tiny random llama model (dim 256, 2 layers, 4 heads over 2
// KV heads, FFN 256, 320 tokens) whose matrices take iqModelTypes in turn. Types with a
// quantizer in engine/quant quantize random normal weights; IQ1_S and IQ1_M (none) take
// random blocks of about the same size.
func iqMixedModel(t *testing.T, seed int64) *model.Model {
	t.Helper()
	const dim, layers, heads, kvHeads, ffn, vocab = 256, 2, 4, 2, 256, 320
	hd := dim / heads
	rng := rand.New(rand.NewSource(seed))
	w := gguf.NewWriter()
	a := "llama"
	w.SetString("general.architecture", a)
	w.SetString("general.name", fmt.Sprintf("random llama mixed i-quants seed %d", seed))
	w.SetUint32(a+".embedding_length", dim)
	w.SetUint32(a+".block_count", layers)
	w.SetUint32(a+".attention.head_count", heads)
	w.SetUint32(a+".attention.head_count_kv", kvHeads)
	w.SetUint32(a+".feed_forward_length", ffn)
	w.SetUint32(a+".context_length", 64)
	w.SetUint32(a+".rope.dimension_count", uint32(hd))
	w.SetFloat32(a+".rope.freq_base", 10000)
	w.SetFloat32(a+".attention.layer_norm_rms_epsilon", 1e-5)
	slot := 0
	mat := func(name string, cols, rows int, scale float64) {
		typ := iqModelTypes[slot%len(iqModelTypes)]
		slot++
		dims := []uint64{uint64(cols), uint64(rows)}
		var err error
		if typ == quant.IQ1_S || typ == quant.IQ1_M {
			err = w.AddTensor(name, typ, dims, randomIQBlocks(rng, typ, cols*rows/typ.BlockSize(), iqElementScale(typ)*scale))
		} else {
			err = w.AddTensorF32(name, typ, dims, randVec(rng, cols*rows, scale))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	vec := func(name string, n int) {
		v := randVec(rng, n, 0.1)
		for i := range v {
			v[i]++
		}
		if err := w.AddTensorF32(name, quant.F32, []uint64{uint64(n)}, v); err != nil {
			t.Fatal(err)
		}
	}
	mat("token_embd.weight", dim, vocab, 1)
	for l := 0; l < layers; l++ {
		b := func(n string) string { return fmt.Sprintf("blk.%d.%s", l, n) }
		s := 1 / math.Sqrt(dim)
		vec(b("attn_norm.weight"), dim)
		mat(b("attn_q.weight"), dim, heads*hd, s)
		mat(b("attn_k.weight"), dim, kvHeads*hd, s)
		mat(b("attn_v.weight"), dim, kvHeads*hd, s)
		mat(b("attn_output.weight"), heads*hd, dim, s)
		vec(b("ffn_norm.weight"), dim)
		mat(b("ffn_gate.weight"), dim, ffn, s)
		mat(b("ffn_up.weight"), dim, ffn, s)
		mat(b("ffn_down.weight"), ffn, dim, 1/math.Sqrt(ffn))
	}
	vec("output_norm.weight", dim)
	mat("output.weight", dim, vocab, 4/math.Sqrt(dim))
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	m := modeltest.LoadBytes(t, "iq-mixed.gguf", data)
	seen := map[quant.Type]bool{}
	for _, mx := range append([]model.Matrix{m.TokenEmbd, m.Output}, m.Layers[0].Q, m.Layers[0].K, m.Layers[0].V, m.Layers[0].O,
		m.Layers[0].Gate, m.Layers[0].Up, m.Layers[0].Down, m.Layers[1].Q, m.Layers[1].K) {
		seen[mx.Type] = true
	}
	if len(seen) != len(iqModelTypes) {
		t.Fatalf("the model holds %d of the %d types", len(seen), len(iqModelTypes))
	}
	return m
}

// A llama model mixing all ten types loads resident and its logits follow the CPU reference
// (engine/cpu, llama.cpp's products: integer block sums of the weights with Q8_0/Q8_K
// activations) at every prompt position and over decode steps, on both tiers. The GPU rounds
// activations to the same blocks and sums f32 products of the exact weights, so the products
// differ by float rounding only; an activation whose 8-bit rounding flips on that moves the
// logits by more, and the fast tier's other kernels (split attention, one-pass RMSNorm) flip
// more of them. Bound: |gpu − cpu| <= 0.08·max(1, max|cpu logit|) for every logit (measured
// on lavapipe: exact tier 2e-7, 0.014 at the one decode step with a flip; fast tier 0.03),
// and the same greedy token wherever the CPU's top-2 gap exceeds twice that bound. Decode
// takes every type's fast decode product (matvec_x8 where the type has one, else matvec_fast)
// on the fast tier and none on the exact tier.
func TestResidentMixedIQuantModelFollowsCPUReference(t *testing.T) {
	c := ctxOrSkip(t)
	m := iqMixedModel(t, 5)
	prompt := []int{1, 300, 17, 250, 99, 7, 42}
	vocab := m.Hyper.VocabSize
	for _, tier := range tiers {
		t.Run(tier.name, func(t *testing.T) {
			withTier(t, c, tier.exact)
			var fastKernels []string
			for _, typ := range iqModelTypes {
				suf, _ := weightSuffix(typ)
				name := "matvec_fast_" + suf
				if x8 := x8Kernel("matvec_x8_", typ); x8 != "" && c.x8 && c.Info.Features[FeatureInt8Dot] {
					name = x8 // the int8 decode product (x8.go)
				}
				fastKernels = append(fastKernels, name)
			}
			forgetKernels(c, fastKernels...)
			r, cr := residentAndCPU(t, c, m, 32)
			defer func() { // decode took each type's fast product on the fast tier only
				for _, k := range fastKernels {
					if _, made := c.kernels[k]; made != !tier.exact {
						t.Errorf("%s tier: kernel %s made %v", tier.name, k, made)
					}
				}
			}()
			check := func(what string, got, want []float32) int {
				t.Helper()
				if len(got) != len(want) {
					t.Fatalf("%s: %d logits, want %d", what, len(got), len(want))
				}
				worst := 0.0
				for row := 0; row < len(want)/vocab; row++ {
					g, w := got[row*vocab:(row+1)*vocab], want[row*vocab:(row+1)*vocab]
					scale := 1.0
					for _, v := range w {
						scale = math.Max(scale, math.Abs(float64(v)))
					}
					tol := 0.08 * scale
					for j := range w {
						d := math.Abs(float64(g[j] - w[j]))
						if d > tol {
							t.Fatalf("%s row %d logit %d: gpu %v, cpu %v (tol %.3g)", what, row, j, g[j], w[j], tol)
						}
						worst = math.Max(worst, d/scale)
					}
					best, second := topTwo(w)
					if gap := float64(w[best] - w[second]); gap > 2*tol && argmax(g) != best {
						t.Fatalf("%s row %d: gpu picks %d, cpu %d with a top-2 gap of %.3g", what, row, argmax(g), best, gap)
					}
				}
				t.Logf("%s: max |gpu − cpu| = %.2g of the largest logit", what, worst)
				return argmax(want[len(want)-vocab:])
			}
			got, err := r.Eval(prompt, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			want, err := cr.Eval(prompt, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			tok := check("prefill", got, want)
			for pos := len(prompt); pos < len(prompt)+4; pos++ {
				if got, err = r.Eval([]int{tok}, pos, false); err != nil {
					t.Fatal(err)
				}
				if want, err = cr.Eval([]int{tok}, pos, false); err != nil {
					t.Fatal(err)
				}
				tok = check(fmt.Sprintf("decode at %d", pos), got, want)
			}
		})
	}
}

// topTwo returns the indices of the largest and second largest values.
func topTwo(v []float32) (int, int) {
	best, second := 0, -1
	for i := 1; i < len(v); i++ {
		switch {
		case v[i] > v[best]:
			best, second = i, best
		case second < 0 || v[i] > v[second]:
			second = i
		}
	}
	return best, second
}

// Every weight type the kernels read is in the list a refusal quotes, each kernel family has
// a shader for it, and a type without kernels (Q8_K, an activation type a GGUF can still hold)
// is refused before any upload with the tensor, its type and the supported list.
func TestCheckModelNamesTheTensorTypeAndTheSupportedTypes(t *testing.T) {
	for _, typ := range iquantTypes {
		suf, ok := weightSuffix(typ)
		if !ok || !SupportsWeight(typ) {
			t.Fatalf("%v: no Vulkan kernels", typ)
		}
		if !strings.Contains(SupportedWeightNames(), typ.String()) {
			t.Errorf("%v missing from the supported list %q", typ, SupportedWeightNames())
		}
		for _, family := range []string{"embed_", "matvec_", "matvec_fast_", "matmul_", "matmul_coopmat_"} {
			if _, err := shaders.SPIRV(family + suf); err != nil {
				t.Errorf("%v: %v", typ, err)
			}
		}
	}
	if SupportsWeight(quant.Q8_K) {
		t.Fatal("Q8_K has kernels now: pick another unsupported type for the refusal")
	}
	data, err := modeltest.Bytes(modeltest.Small("llama", quant.Q8_K, 3))
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.OpenBytes("q8_k.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckModel(m)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("CheckModel of a Q8_K model: %v, want ErrUnsupported", err)
	}
	for _, want := range []string{`"token_embd.weight"`, "Q8_K", "BF16", "Q2_K", "IQ2_XXS", "MXFP4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %s", err, want)
		}
	}
}
