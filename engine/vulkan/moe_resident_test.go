package vulkan

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/cpu"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/model/synth"
	"github.com/vkllm/vkllm/engine/quant"
)

// The mixture-of-experts models resident on the device: qwen3moe (renormalised top-k, no
// shared expert) and qwen2moe (unnormalised weights, a shared expert under its sigmoid gate).

// loadTiny writes `vkllm synth`'s tiny preset of arch in typ with seed and loads it.
func loadTiny(t *testing.T, dir, arch string, typ quant.Type, seed uint64) *model.Model {
	t.Helper()
	return loadTinyMix(t, dir, arch, synth.Uniform(typ), seed)
}

// loadTinyMix is loadTiny with each role's type from mix.
func loadTinyMix(t *testing.T, dir, arch string, mix synth.Mix, seed uint64) *model.Model {
	t.Helper()
	return modeltest.Load(t, modeltest.TinySynthMix(t, dir, arch, mix, seed))
}

// On F32 weights nothing is rounded to 8 bits, so the resident forward and the CPU reference
// differ only by f32 summation order and the f16 KV cache's use: every logit of a batched
// prefill within 0.01 of the CPU's, decode step by step within 0.01 of the prefill's, and the
// device's argmax equal to the host's; a split (layer 0 on the CPU, layer 1 and the head on the
// device) within 0.01 of the CPU too. Measured on lavapipe: 0.005 on the fast tier, 0.002 on
// the exact one, the same as the dense qwen3 and qwen2 models of this shape; wrong routing
// moves logits (of ~1-15) by 0.5 and more. Prompts of 9 rows route each of the 8 experts
// several times.
func TestResidentMoEAgreesWithCPU(t *testing.T) {
	c := ctxOrSkip(t)
	tokens := []int{1, 262, 300, 275, 307, 260, 310, 99, 12}
	dir := t.TempDir()
	for _, arch := range []string{"qwen3moe", "qwen2moe"} {
		t.Run(arch, func(t *testing.T) {
			m := loadTiny(t, dir, arch, quant.F32, 5)
			r, err := NewResident(c, m, ResidentOptions{Context: 64, CaptureRouting: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cr, err := cpu.New(m, cpu.Options{Threads: 1, Context: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer cr.Close()
			vocab := m.Hyper.VocabSize
			batched, err := r.Eval(tokens, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			want, err := cr.Eval(tokens, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i := range want {
				d := math.Abs(float64(batched[i] - want[i]))
				worst = math.Max(worst, d)
				if !(d <= 1e-2) {
					t.Fatalf("position %d logit %d: gpu %v, cpu %v (tol 1e-2)", i/vocab, i%vocab, batched[i], want[i])
				}
			}
			// the device's routing (CaptureRouting) is the CPU's, and each decode step's the
			// prefill's row
			ref := &cpuReference{rounded: cr, moe: true, model: m}
			if apart := ref.routingApart(t, r, len(tokens)); apart != "" {
				t.Fatalf("prefill routed otherwise: %s", apart)
			}
			prefillRouting, err := r.Routing(len(tokens))
			if err != nil {
				t.Fatal(err)
			}
			used := m.Hyper.MoE.Used
			for i, tok := range tokens {
				one, err := r.Eval([]int{tok}, i, false)
				if err != nil {
					t.Fatal(err)
				}
				stepRouting, err := r.Routing(1)
				if err != nil {
					t.Fatal(err)
				}
				for l := range stepRouting {
					if want := prefillRouting[l][i*used : (i+1)*used]; !slices.Equal(stepRouting[l], want) {
						t.Fatalf("position %d layer %d: decode step routed to %v, the prefill to %v", i, l, stepRouting[l], want)
					}
				}
				for j := 0; j < vocab; j++ {
					if d := math.Abs(float64(one[j] - batched[i*vocab+j])); !(d <= 1e-2) {
						t.Fatalf("position %d logit %d: decode %v, prefill %v (tol 1e-2)", i, j, one[j], batched[i*vocab+j])
					}
				}
			}
			if _, err := r.Eval(tokens[:len(tokens)-1], 0, false); err != nil {
				t.Fatal(err)
			}
			best, err := r.Greedy(tokens[len(tokens)-1], len(tokens)-1)
			if err != nil {
				t.Fatal(err)
			}
			if host := argmax(batched[(len(tokens)-1)*vocab:]); best != host {
				t.Fatalf("device argmax %d, host argmax %d", best, host)
			}
			t.Logf("largest |gpu − cpu| logit %.2g", worst)
			if _, err := r.Routing(len(tokens)); err == nil {
				t.Errorf("Routing of %d rows after a %d-row pass: no error", len(tokens), 1)
			}
			plain, err := NewResident(c, m, ResidentOptions{Context: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			if _, err := plain.Routing(1); err == nil {
				t.Errorf("Routing on a runner opened without CaptureRouting: no error")
			}
			sp, err := NewSplit(c, m, SplitOptions{Context: 64, FirstGPULayer: 1, HeadOnGPU: true, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer sp.Close()
			split, err := sp.Eval(tokens, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if d := math.Abs(float64(split[i] - want[i])); !(d <= 1e-2) {
					t.Fatalf("split at layer 1: position %d logit %d: %v, cpu %v (tol 1e-2)", i/vocab, i%vocab, split[i], want[i])
				}
			}
		})
	}
}

// The tiny qwen3moe and qwen2moe models of engine/testdata/synth-llamacpp continue every
// prompt with llama.cpp's greedy ids up to the first near-tie, on the fast tier (the default)
// for every golden type, and on the exact tier for Q8_0 (the expert kernels are the same on
// both tiers; the exact tier changes the attention, norms and dense products around them).
// Bounds as the i-quant llama models' (iqRefTolerance, iqRefNearTie): the 8-bit activation
// rounding before every product turns last-bit differences into logit moves of up to ~0.2;
// a step the CPU reference routes within routerTie of another expert ends the case.
func TestResidentMoESynthModelsMatchLlamaCpp(t *testing.T) {
	c := ctxOrSkip(t)
	var goldens []string
	for _, arch := range []string{"qwen3moe", "qwen2moe"} {
		g, err := filepath.Glob("../testdata/synth-llamacpp/" + arch + "-*.jsonl")
		if err != nil || len(g) == 0 {
			t.Fatalf("no %s golden files in engine/testdata/synth-llamacpp (%v)", arch, err)
		}
		goldens = append(goldens, g...)
	}
	dir := t.TempDir()
	for _, golden := range goldens {
		arch, typName, _ := strings.Cut(strings.TrimSuffix(filepath.Base(golden), ".jsonl"), "-")
		typ, err := synth.ParseType(typName)
		if err != nil {
			t.Fatal(err)
		}
		m := loadTiny(t, dir, arch, typ, 7)
		cases := readGolden(t, golden)
		for _, tier := range tiers {
			if tier.exact && typ != quant.Q8_0 {
				continue
			}
			t.Run(fmt.Sprintf("%s-%s/%s", arch, typName, tier.name), func(t *testing.T) {
				withTier(t, c, tier.exact)
				// the fast tier's decode steps take the int8 expert products where the type has
				// one (x8.go; the gate and up experts at least: a tiny K-quant model's down
				// experts fall back to a 32-block type): forget the pipeline so the check below
				// sees this model make it
				// (moe_matvec_x8r_<type> where the gate and up products route themselves,
				// VKLLM_GPU_ROUTE_IN_EXPERTS, without a shared expert)
				x8Name := x8Kernel("moe_matvec_x8_", typ)
				if c.routeInExperts && m.Hyper.MoE.SharedFFN == 0 && x8Name != "" {
					x8Name = x8Kernel("moe_matvec_x8r_", typ)
				}
				x8 := !tier.exact && c.x8 && c.Info.Features[FeatureInt8Dot] && x8Name != ""
				if x8 {
					forgetKernels(c, x8Name)
				}
				// and their down products add the combine to the residual themselves (moe_down_x8)
				// where the down experts' type has one too
				downName := x8Kernel("moe_down_x8_", m.Layers[0].MoE.Down.Type)
				fold := x8 && downName != "" && m.Hyper.MoE.SharedFFN <= m.Hyper.Dim
				if fold {
					forgetKernels(c, downName)
				}
				// the f32 router's decode product is the fast one on the fast tier (it took the
				// one-thread-a-row matvec before); with int8 experts and no shared expert, the
				// one that normalizes x itself (matvec_norm_f32, VKLLM_GPU_ROUTER_NORM), also with
				// a shared expert on the int8 products (VKLLM_GPU_NORM_F32, VKLLM_GPU_SHARED_X8)
				// and without a shared expert, the one that routes in its last workgroup too
				// (router_route_f32, VKLLM_GPU_ROUTER_ROUTE)
				routerKernel := "matvec_fast_f32"
				if x8 && c.routerNorm && (m.Hyper.MoE.SharedFFN == 0 || c.normF32 && c.sharedX8) {
					routerKernel = "matvec_norm_f32"
					if m.Hyper.MoE.SharedFFN == 0 && c.routerRoute && !c.routeInExperts {
						routerKernel = c.routeKernel("router_route_f32", m.Hyper.MoE.Experts)
					}
				}
				forgetKernels(c, routerKernel)
				r, err := NewResident(c, m, ResidentOptions{Context: 64, CaptureRouting: true})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				ref := goldenReference(t, c, m, typ, 64)
				compared := compareResidentWithGolden(t, r, cases, iqRefTolerance, iqRefNearTie, ref)
				t.Logf("%d steps compared", compared)
				if compared >= 0 && compared < 8 {
					t.Errorf("only %d steps compared before near-ties: the golden file no longer tests much", compared)
				}
				if _, made := c.kernels[x8Name]; x8 && !made {
					t.Errorf("the decode steps did not take %s", x8Name)
				}
				if _, made := c.kernels[downName]; fold && !made {
					t.Errorf("the decode steps' down products did not fold the combine in (%s)", downName)
				}
				if _, made := c.kernels[routerKernel]; m.Layers[0].MoE.Router.Type == quant.F32 && made == tier.exact {
					t.Errorf("%s tier: the f32 router's fast decode product (%s) made = %v", tier.name, routerKernel, made)
				}
			})
		}
	}
}
