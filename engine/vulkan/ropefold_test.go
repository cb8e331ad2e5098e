package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// MatVecX8RopeKV must make exactly what MatVecX8 then RopeKV make, bit for bit: the rotated
// queries, and the key and value rows packed into the caches at the position (the rest of the
// caches untouched), with whole and partial rotation, on grids that share rows among subgroups
// and on grids that do not.
func TestMatVecX8RopeKVEqualsProductThenRopeKV(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no matvec_x8", c.Info.Name)
	}
	defer func(prev int) { c.matvecShareBelow = prev }(c.matvecShareBelow)
	const k, headDim, nHead, nKV, pos, ctx = 256, 64, 8, 2, 5, 8
	qd, kd := nHead*headDim, nKV*headDim
	rng := rand.New(rand.NewSource(12))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q4_K, quant.Q6_K} {
		for _, ropeDim := range []int{headDim, headDim / 2} {
			for _, share := range []bool{true, false} {
				t.Run(fmt.Sprintf("%v/rope%d/share=%v", typ, ropeDim, share), func(t *testing.T) {
					c.matvecShareBelow = 0
					if share {
						c.matvecShareBelow = 1 << 20
					}
					w := func(n int) *Buffer {
						wq, _ := moeTestWeights(t, rng, typ, k, n, 1)
						return uploadBytes(t, c, wq)
					}
					wqb, wkb, wvb := w(qd), w(kd), w(kd)
					x := upload(t, c, randVec(rng, k, 2))
					xq, xs := uploadBytes(t, c, make([]byte, x8QuantBytes(k))), uploadBytes(t, c, make([]byte, x8ScaleBytes(k)))
					angles := make([]float32, ropeDim)
					RopeAngles(angles, pos, 1, ropeDim, 10000, 1, nil)
					cs, pb := upload(t, c, angles), uploadU32(t, c, []uint32{pos})
					cache := func() *Buffer { return uploadU32(t, c, slices.Repeat([]uint32{0x3c003c00}, ctx*kd/2)) } // 1.0 halves
					// the product, then rope_kv
					q1, k1, v1 := upload(t, c, make([]float32, qd)), upload(t, c, make([]float32, kd)), upload(t, c, make([]float32, kd))
					kc1, vc1 := cache(), cache()
					// the product ending as rope_kv does
					q2, kc2, vc2 := upload(t, c, make([]float32, qd)), cache(), cache()
					run(t, c, func(s *Seq) {
						s.QuantizeX8(x.All(), xq.All(), xs.All(), k, 1, X8Input{Q8K: x8Q8K(typ)})
						s.Barrier()
						s.MatVecX8(typ, wqb.All(), xq.All(), xs.All(), q1.All(), k, qd, false)
						s.MatVecX8(typ, wkb.All(), xq.All(), xs.All(), k1.All(), k, kd, false)
						s.MatVecX8(typ, wvb.All(), xq.All(), xs.All(), v1.All(), k, kd, false)
						s.Barrier()
						s.RopeKV(q1.All(), k1.All(), v1.All(), cs.All(), kc1.All(), vc1.All(), pb.All(), headDim, nHead, 1, ropeDim, false, qd, kd, kd)
						for i, dst := range []*Buffer{q2, kc2, vc2} {
							wb := []*Buffer{wqb, wkb, wvb}[i]
							n := []int{qd, kd, kd}[i]
							s.MatVecX8RopeKV(typ, wb.All(), xq.All(), xs.All(), dst.All(), cs.All(), pb.All(), k, n, headDim, ropeDim, x8RopeKVMode(i))
						}
					})
					for _, pair := range []struct {
						name string
						a, b *Buffer
					}{{"queries", q1, q2}, {"key cache", kc1, kc2}, {"value cache", vc1, vc2}} {
						want, err := pair.a.Read(0, pair.a.Size)
						if err != nil {
							t.Fatal(err)
						}
						got, err := pair.b.Read(0, pair.b.Size)
						if err != nil {
							t.Fatal(err)
						}
						if i := firstDiff(want, got); i >= 0 {
							t.Fatalf("%s: byte %d of %d differs: %#02x, want %#02x (rope_kv)", pair.name, i, len(want), got[i], want[i])
						}
					}
				})
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	if len(b) != len(a) {
		return len(a)
	}
	return -1
}

// A llama model's decode step ends its query, key and value products as rope_kv does (the
// ROPE_KV variant, no rope_kv dispatch), with the same logits bit for bit as running rope_kv
// after them (VKLLM_GPU_ROPE_FOLD=0). Fails if the driver stops folding.
func TestDecodeFoldsRopeKVIntoTheProducts(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no matvec_x8", c.Info.Name)
	}
	withTier(t, c, false)
	defer func(x8, fold bool) { c.x8, c.ropeFold = x8, fold }(c.x8, c.ropeFold)
	c.x8 = true
	m := loadShared(t, "rand-llama-q8_0")
	decode := func(fold bool) []float32 {
		c.ropeFold = fold
		forgetKernels(c, "rope_kv", "matvec_x8_q8_0_rkv")
		r, err := NewResident(c, m, ResidentOptions{Context: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var all []float32
		for i, id := range []int{1, 450, 3290, 17} { // one token a step: the decode command only
			logits, err := r.Eval([]int{id}, i, false)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, logits...)
		}
		_, roped := c.kernels["matvec_x8_q8_0_rkv"]
		_, ropeKV := c.kernels["rope_kv"]
		if roped != fold || ropeKV == fold {
			t.Fatalf("fold %v: made matvec_x8_q8_0_rkv %v, rope_kv %v", fold, roped, ropeKV)
		}
		return all
	}
	apart, folded := decode(false), decode(true)
	for i := range apart {
		if apart[i] != folded[i] {
			t.Fatalf("logit %d: %v folded, %v with rope_kv after the products", i, folded[i], apart[i])
		}
	}
}

// A llama model's decode step on the int8 products normalizes the head's input in the head's
// rounding pass (quantize_x8 with the output norm): the recording makes no RMSNorm kernel at
// all (the layers' norms are folded into their rounding passes already). Fails if the head
// goes back to a norm stage of its own.
func TestDecodeHeadRoundsTheOutputNorm(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no matvec_x8", c.Info.Name)
	}
	withTier(t, c, false)
	defer func(x8 bool) { c.x8 = x8 }(c.x8)
	c.x8 = true
	forgetKernels(c, "rmsnorm", "rmsnorm_fast")
	r, err := NewResident(c, loadShared(t, "rand-llama-q8_0"), ResidentOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Eval([]int{1}, 0, false); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rmsnorm", "rmsnorm_fast"} {
		if _, made := c.kernels[k]; made {
			t.Errorf("the decode step made %s: the head's input has a norm stage of its own", k)
		}
	}
}

// decodeSteps opens a resident runner on m (a 64-position context) and returns the logits of
// four single-token decode steps (tokens 1, 45, 329, 17 at positions 0-3) and its decode
// command's barriers.
func decodeSteps(t *testing.T, c *Context, m *model.Model) ([]float32, int) {
	t.Helper()
	r, err := NewResident(c, m, ResidentOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var logits []float32
	for i, id := range []int{1, 45, 329, 17} {
		l, err := r.Eval([]int{id}, i, false)
		if err != nil {
			t.Fatal(err)
		}
		logits = append(logits, l...)
	}
	return logits, r.decode.barriers
}

// decodeSwitched runs four single-token decode steps of m with a fast-tier switch off, then on
// (set sets it), checking that the kernel is made exactly when the switch is on; it returns
// each run's logits and its decode command's barriers, keyed by the switch.
func decodeSwitched(t *testing.T, c *Context, m *model.Model, kernel string, set func(bool)) (logits map[bool][]float32, barriers map[bool]int) {
	t.Helper()
	logits, barriers = map[bool][]float32{}, map[bool]int{}
	for _, on := range []bool{false, true} {
		set(on)
		forgetKernels(c, kernel)
		logits[on], barriers[on] = decodeSteps(t, c, m)
		if _, made := c.kernels[kernel]; made != on {
			t.Fatalf("switch %v: made %s %v", on, kernel, made)
		}
	}
	return logits, barriers
}

// maxAbsDiff is the largest |a[i] - b[i]|.
func maxAbsDiff(a, b []float32) float64 {
	worst := 0.0
	for i := range a {
		worst = math.Max(worst, math.Abs(float64(a[i]-b[i])))
	}
	return worst
}

// qwen3's and the qwen35 hybrid's per-head query and key norms run inside the rotation and
// KV store on the fast tier (rope_kv_norm, VKLLM_GPU_ROPE_NORMS): one barrier fewer for every
// attention layer, logits within f32-level differences of the norm stage's (both sum a head's
// squares, in different orders; an int8 rounding flipped by the last bit moves a tiny model's
// logits by a few hundredths). Fails if the fold is not wired.
func TestHeadNormsRunInsideRopeKV(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, false)
	defer func(on, fresh bool) { c.ropeNorms, c.attFreshKV = on, fresh }(c.ropeNorms, c.attFreshKV)
	c.attFreshKV = false // the stage this test measures: VKLLM_GPU_ATT_FRESH_KV takes it out
	for _, tc := range []struct {
		arch       string
		attnLayers int
	}{{"qwen3", 2}, {"qwen35", 1}} {
		t.Run(tc.arch, func(t *testing.T) {
			m := loadTiny(t, "", tc.arch, quant.Q8_0, 5)
			kernel, fewer := "rope_kv_norm", tc.attnLayers
			if tc.arch == "qwen35" && c.gateFolds {
				// the queries read out of the gated projection, the attention's ranges merged and
				// the output gated in its rounding (VKLLM_GPU_GATE_FOLDS, which needs the norms in
				// the rotation): three more
				kernel, fewer = "rope_kv_norm_gq", 4*tc.attnLayers
			}
			logits, barriers := decodeSwitched(t, c, m, kernel, func(on bool) { c.ropeNorms = on })
			if d := barriers[false] - barriers[true]; d != fewer {
				t.Errorf("the decode step has %d barriers with the norms in the rotation, %d without: want %d fewer", barriers[true], barriers[false], fewer)
			}
			worst := maxAbsDiff(logits[false], logits[true])
			if !(worst <= 0.1) {
				t.Fatalf("logits differ by up to %g from the norm stage's", worst)
			}
			t.Logf("logits within %.2g of the norm stage's", worst)
		})
	}
}

// An f32 model's decode step (stories260K, the embedded default) normalizes x inside its
// normed products (matvec_norm_f32: the q, k and v products, gate and up, and the head;
// VKLLM_GPU_NORM_F32): two barriers fewer a layer and one fewer for the head, logits within
// 1e-3 of the RMSNorm stages' (f32 sums in another order, nothing rounded to 8 bits; measured
// ~1e-6 on lavapipe); and its down product computes SwiGLU itself (VKLLM_GPU_SWIGLU_F32), one
// barrier fewer a layer, the same bound. Fails if either fold is not wired.
func TestF32DecodeFoldsNormsAndSwiGLUIntoTheProducts(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, false)
	defer func(on bool) { c.normF32 = on }(c.normF32)
	f, err := gguf.OpenBytes(embedded.Name, embedded.ModelGGUF)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	logits, barriers := decodeSwitched(t, c, m, "matvec_norm_f32", func(on bool) { c.normF32 = on })
	if d, want := barriers[false]-barriers[true], 2*len(m.Layers)+1; d != want {
		t.Errorf("the decode step has %d barriers with the products normalizing, %d without: want %d fewer", barriers[true], barriers[false], want)
	}
	worst := maxAbsDiff(logits[false], logits[true])
	if !(worst <= 1e-3) {
		t.Fatalf("logits differ by up to %g from the RMSNorm stages'", worst)
	}
	t.Logf("logits within %.2g of the RMSNorm stages'", worst)

	// and its FFN down product computes SwiGLU itself (matvec_swiglu_f32, VKLLM_GPU_SWIGLU_F32):
	// one barrier fewer a layer, the same bound
	defer func(on bool) { c.swigluF32 = on }(c.swigluF32)
	logits, barriers = decodeSwitched(t, c, m, "matvec_swiglu_f32", func(on bool) { c.swigluF32 = on })
	if d, want := barriers[false]-barriers[true], len(m.Layers); d != want {
		t.Errorf("the decode step has %d barriers with SwiGLU in the down product, %d without: want %d fewer", barriers[true], barriers[false], want)
	}
	worst = maxAbsDiff(logits[false], logits[true])
	if !(worst <= 1e-3) {
		t.Fatalf("logits differ by up to %g from the SwiGLU stage's", worst)
	}
	t.Logf("logits within %.2g of the SwiGLU stage's", worst)
}
