package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// A decode step's split attention with the step's queries and key fresh from their products
// (AttentionSplitRangesFresh, attention_flash_rn_*, VKLLM_GPU_ATT_FRESH_KV) makes what rope_kv_norm then
// attention_flash make, within f32 rounding: every partial (each range's maximum, sum and
// unnormalized output) within 1e-4 relative to max(1, |ref|) (the two sum a head's squares in
// different orders, and a key half may land one f16 step apart), the step's key row within one
// f16 step, its value row and every other cache row bit for bit. The cache row at the step's
// position starts as junk, so a kernel reading it back from the cache instead of its own copy
// fails. Cases: full and partial rotation, both pairings, one and several ranges, a KV head's
// heads over one workgroup and over several (the store's one writer), heads of 64, 128 and 256.
func TestFreshKVAttentionMatchesRopeKVNormThenAttention(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, false)
	defer func(on bool) { c.attFreshKV = on }(c.attFreshKV)
	c.attFreshKV = true
	if c.freshKVKernel(1, 64, 8, 2, 64) == "" {
		t.Skipf("%s: no attention_flash (subgroup shuffles and arithmetic) or VKLLM_GPU_ATT_FRESH_KV=0, so no attention_flash_rn", c.Info.Name)
	}
	defer func(heads, minRange int) { c.flashHeads, c.flashMinRange = heads, minRange }(c.flashHeads, c.flashMinRange)
	for _, tc := range []struct {
		headDim, nHead, nKV, ropeDim, pos, ctx, heads, minRange int
		neox                                                    bool
	}{
		{64, 8, 2, 64, 37, 256, 0, 0, true},      // one range, a KV head's four heads in one workgroup
		{64, 8, 2, 16, 200, 512, 1, 16, false},   // partial rotation, adjacent pairs, 13 ranges, four workgroups a KV head
		{128, 32, 4, 128, 129, 512, 0, 32, true}, // a qwen3moe layer's step: two workgroups a KV head, five ranges
		{256, 4, 2, 64, 70, 256, 0, 0, true},     // 256-wide heads, 64 rotated
	} {
		name := fmt.Sprintf("hd%d/heads%d-%d/rope%d/neox%v/pos%d/hp%d/range%d", tc.headDim, tc.nHead, tc.nKV, tc.ropeDim, tc.neox, tc.pos, tc.heads, tc.minRange)
		t.Run(name, func(t *testing.T) {
			c.flashHeads, c.flashMinRange = tc.heads, flashMinRange
			if tc.minRange > 0 {
				c.flashMinRange = tc.minRange
			}
			kernel := c.freshKVKernel(1, tc.headDim, tc.nHead, tc.nKV, tc.ropeDim)
			if kernel == "" {
				t.Fatalf("no attention_flash_rn kernel for heads of %d", tc.headDim)
			}
			rng := rand.New(rand.NewSource(int64(tc.headDim + tc.pos)))
			qd, kd := tc.nHead*tc.headDim, tc.nKV*tc.headDim
			q, k, v := randVec(rng, qd, 2), randVec(rng, kd, 2), randVec(rng, kd, 1)
			qn, kn := randVec(rng, tc.headDim, 1), randVec(rng, tc.headDim, 1)
			cs := make([]float32, tc.ropeDim)
			RopeAngles(cs, tc.pos, 1, tc.ropeDim, 10000, 1, nil)
			old := make([]uint32, tc.ctx*kd/2)
			for i := range old { // earlier rows: keys and values of unit size; the step's row and later: junk
				if i < tc.pos*kd/2 {
					old[i] = packF16Pair(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
				} else {
					old[i] = packF16Pair(100, -100)
				}
			}
			csb, pb, qnb, knb := upload(t, c, cs), uploadU32(t, c, []uint32{uint32(tc.pos)}), upload(t, c, qn), upload(t, c, kn)
			kb, vb := upload(t, c, k), upload(t, c, v)
			q1, kc1, vc1 := upload(t, c, q), uploadU32(t, c, old), uploadU32(t, c, old)
			q2, kc2, vc2 := upload(t, c, q), uploadU32(t, c, old), uploadU32(t, c, old)
			floats := c.attentionPartialFloats(1, tc.nHead, tc.nKV, tc.headDim, tc.ctx)
			part1, part2 := zeros(t, c, floats), zeros(t, c, floats)
			const eps = 1e-6
			scale := float32(1 / math.Sqrt(float64(tc.headDim)))
			var want, got int
			forgetKernels(c, kernel)
			run(t, c, func(s *Seq) {
				s.RopeKVNorm(q1.All(), kb.All(), vb.All(), csb.All(), kc1.All(), vc1.All(), pb.All(), qnb.All(), knb.All(),
					tc.headDim, tc.nHead, 1, tc.ropeDim, tc.neox, qd, kd, kd, eps)
				s.Barrier()
				want = s.AttentionSplitRanges(q1.All(), kc1.All(), vc1.All(), pb.All(), part1.All(), tc.headDim, tc.nHead, tc.nKV, 1, qd, tc.ctx, scale)
			})
			run(t, c, func(s *Seq) {
				fresh := &FreshKV{K: kb.All(), V: vb.All(), CS: csb.All(), QNorm: qnb.All(), KNorm: knb.All(), RopeDim: tc.ropeDim, NeoX: tc.neox, Eps: eps}
				got = s.AttentionSplitRangesFresh(fresh, q2.All(), kc2.All(), vc2.All(), pb.All(), part2.All(), tc.headDim, tc.nHead, tc.nKV, 1, qd, tc.ctx, scale)
			})
			if _, made := c.kernels[kernel]; !made {
				t.Fatalf("%s was not made", kernel)
			}
			if got != want || got == 0 {
				t.Fatalf("%d ranges, want %d (rope_kv_norm then attention_flash)", got, want)
			}
			n := want * tc.nHead * (tc.headDim + 2)
			a, b := readF32(t, part1, n), readF32(t, part2, n)
			filled := 0
			for i := range a {
				if math.IsInf(float64(a[i]), -1) && math.IsInf(float64(b[i]), -1) {
					continue // an empty range's maximum
				}
				if e := math.Abs(float64(b[i]-a[i])) / math.Max(1, math.Abs(float64(a[i]))); !(e <= 1e-4) {
					t.Fatalf("partial %d (head %d, range %d): %v, want %v", i, i/(tc.headDim+2)/want, i/(tc.headDim+2)%want, b[i], a[i])
				}
				if i%(tc.headDim+2) == 1 && a[i] > 0 {
					filled++
				}
			}
			for _, cc := range []struct {
				name      string
				want, got *Buffer
				f16Step   bool
			}{{"key cache", kc1, kc2, true}, {"value cache", vc1, vc2, false}} {
				w, err := cc.want.ReadU32(0, len(old))
				if err != nil {
					t.Fatal(err)
				}
				g, err := cc.got.ReadU32(0, len(old))
				if err != nil {
					t.Fatal(err)
				}
				for i := range w {
					if g[i] == w[i] {
						continue
					}
					step := i >= tc.pos*kd/2 && i < (tc.pos+1)*kd/2
					if !step || !cc.f16Step {
						t.Fatalf("%s word %d (row %d): got %#x, want %#x", cc.name, i, i/(kd/2), g[i], w[i])
					}
					for _, half := range []uint32{0, 16} {
						x, y := quant.F16ToF32(uint16(w[i]>>half)), quant.F16ToF32(uint16(g[i]>>half))
						if math.Abs(float64(x-y)) > math.Max(1, math.Abs(float64(x)))/1024 {
							t.Fatalf("%s word %d: half %v, want %v (one f16 step)", cc.name, i, y, x)
						}
					}
				}
			}
			t.Logf("%s: %d ranges of %d filled across %d heads", kernel, filled, want*tc.nHead, tc.nHead)
		})
	}
}

// qwen3's and qwen3moe's decode steps on the fast tier do rope_kv_norm's work inside split
// attention (VKLLM_GPU_ATT_FRESH_KV): one barrier fewer an attention layer, logits within 0.1
// of the stage's over four steps (f32-level differences in the norms, a key half one f16 step
// apart at most; an int8 rounding flipped by the last bit moves a tiny model's logits by a few
// hundredths). Fails if the attention stops taking the fresh keys.
func TestDecodeAttentionTakesTheStepsKeysFresh(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, false)
	defer func(on bool) { c.attFreshKV = on }(c.attFreshKV)
	dir := t.TempDir()
	for _, arch := range []string{"qwen3", "qwen3moe"} {
		t.Run(arch, func(t *testing.T) {
			m := loadTiny(t, dir, arch, quant.Q8_0, 5)
			h := m.Hyper
			c.attFreshKV = true
			kernel := c.freshKVKernel(1, h.HeadDim, h.Heads, h.HeadsKV, h.HeadDim)
			if kernel == "" {
				t.Skipf("%s: no attention_flash_rn for heads of %d (no subgroup shuffles or arithmetic)", c.Info.Name, h.HeadDim)
			}
			logits, barriers := decodeSwitched(t, c, m, kernel, func(on bool) { c.attFreshKV = on })
			if d, want := barriers[false]-barriers[true], len(m.Layers); d != want {
				t.Errorf("the decode step has %d barriers with the attention taking fresh keys, %d without: want %d fewer", barriers[true], barriers[false], want)
			}
			worst := maxAbsDiff(logits[false], logits[true])
			if !(worst <= 0.1) {
				t.Fatalf("logits differ by up to %g from rope_kv_norm's stage", worst)
			}
			t.Logf("logits within %.2g of rope_kv_norm's stage", worst)
		})
	}
}

// BenchmarkFreshKVAttention times a qwen3moe layer's decode attention (32 query heads of 128
// over 4 KV heads, a 4096-position context) at several positions three ways: rope_kv_norm then
// attention_flash (two stages), attention_flash_rn (one), and attention_flash alone (the
// floor). Run on a real GPU: -test.run '^$' -test.bench FreshKVAttention -test.benchtime 3x.
func BenchmarkFreshKVAttention(b *testing.B) {
	c := gpuCtxOrSkip(b)
	defer func(on bool) { c.attFreshKV = on }(c.attFreshKV)
	c.attFreshKV = true
	if c.exact || c.freshKVKernel(1, 128, 32, 4, 128) == "" {
		b.Skipf("%s: no attention_flash_rn here", c.Info.Name)
	}
	const headDim, nHead, nKV, ctx, reps = 128, 32, 4, 4096, 32
	qd, kd := nHead*headDim, nKV*headDim
	rng := rand.New(rand.NewSource(9))
	cache := make([]uint32, ctx*kd/2)
	for i := range cache {
		cache[i] = packF16Pair(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
	}
	cacheBytes := func() *Buffer {
		out := make([]byte, 4*len(cache))
		for i, w := range cache {
			out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = byte(w), byte(w>>8), byte(w>>16), byte(w>>24)
		}
		return benchBuffer(b, c, out)
	}
	kc, vc := cacheBytes(), cacheBytes()
	q, k, v := benchBuffer(b, c, f32Bytes(randVec(rng, qd, 2))), benchBuffer(b, c, f32Bytes(randVec(rng, kd, 2))), benchBuffer(b, c, f32Bytes(randVec(rng, kd, 1)))
	qRoped := benchBuffer(b, c, f32Bytes(randVec(rng, qd, 2)))
	qn, kn := benchBuffer(b, c, f32Bytes(randVec(rng, headDim, 1))), benchBuffer(b, c, f32Bytes(randVec(rng, headDim, 1)))
	part := benchBuffer(b, c, make([]byte, 4*c.attentionPartialFloats(1, nHead, nKV, headDim, ctx)))
	scale := float32(1 / math.Sqrt(headDim))
	for _, p0 := range []int{100, 1000, 4000} {
		angles := make([]float32, headDim)
		RopeAngles(angles, p0, 1, headDim, 1e6, 1, nil)
		cs, pos := benchBuffer(b, c, f32Bytes(angles)), benchBuffer(b, c, []byte{byte(p0), byte(p0 >> 8), 0, 0})
		two := bestNsPerRep(b, c, reps, func(s *Seq) {
			s.RopeKVNorm(qRoped.All(), k.All(), v.All(), cs.All(), kc.All(), vc.All(), pos.All(), qn.All(), kn.All(), headDim, nHead, 1, headDim, true, qd, kd, kd, 1e-6)
			s.Barrier()
			s.AttentionSplitRanges(qRoped.All(), kc.All(), vc.All(), pos.All(), part.All(), headDim, nHead, nKV, 1, qd, ctx, scale)
		})
		one := bestNsPerRep(b, c, reps, func(s *Seq) {
			fresh := &FreshKV{K: k.All(), V: v.All(), CS: cs.All(), QNorm: qn.All(), KNorm: kn.All(), RopeDim: headDim, NeoX: true, Eps: 1e-6}
			s.AttentionSplitRangesFresh(fresh, q.All(), kc.All(), vc.All(), pos.All(), part.All(), headDim, nHead, nKV, 1, qd, ctx, scale)
		})
		alone := bestNsPerRep(b, c, reps, func(s *Seq) {
			s.AttentionSplitRanges(qRoped.All(), kc.All(), vc.All(), pos.All(), part.All(), headDim, nHead, nKV, 1, qd, ctx, scale)
		})
		fmt.Printf("decode attention at position %d: rope_kv_norm then attention_flash %.2f us, attention_flash_rn %.2f us, attention_flash alone %.2f us (each with its barrier)\n",
			p0, two/1e3, one/1e3, alone/1e3)
	}
}
