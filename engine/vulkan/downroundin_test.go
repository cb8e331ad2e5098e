package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// moe_down_x8's ROUND_IN variant (MoEDownX8RoundIn, VKLLM_GPU_DOWN_ROUND_IN) rounds the pairs'
// hidden rows in each workgroup as quantize_x8 rounds them for the down type, so the residual
// it writes equals, bit for bit, quantize_x8 then moe_down_x8. Rows of several blocks, the
// most values it takes (6144), rows past a workgroup's end, a repeated expert, the shared
// expert, a rounding block of zeros, and equal largest magnitudes of both signs in a block.
func TestMoEDownX8RoundInEqualsRoundingThenDown(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no moe_down_x8", c.Info.Name)
	}
	const n, ne = 37, 5
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ2_XXS} {
		ks := []int{96, 1536}
		if typ.BlockSize() > 32 {
			ks = []int{768, 1536}
		}
		for _, k := range ks {
			for _, shared := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/k=%d/shared=%v", typ, k, shared), func(t *testing.T) {
					ids := []uint32{4, 1, 1, 0}
					used := moeDownRoundInMax / k
					used = min(used, len(ids))
					ids = ids[:used]
					rng := rand.New(rand.NewSource(int64(typ)*17 + int64(k)))
					wq, _ := moeTestWeights(t, rng, typ, k, n, ne)
					h := randVec(rng, used*k, 1)
					block := 32 // quantize_x8's rounding block for typ
					if x8Q8K(typ) {
						block = 256
					}
					if 2*block <= k {
						clear(h[block : 2*block])
					}
					if used > 1 {
						row := h[k : 2*k]
						row[5], row[77] = -6.5, 6.5 // equal magnitudes, both signs: the first sets the sign
						row[k-3], row[k-40] = 7.25, -7.25
					}
					wts := randVec(rng, used, 1)
					x, sh, g := randVec(rng, n, 1), randVec(rng, n, 1), randVec(rng, 1, 2)
					hb, ib, wb, shb, gb, wqb := upload(t, c, h), uploadU32(t, c, ids), upload(t, c, wts), upload(t, c, sh), upload(t, c, g), uploadBytes(t, c, wq)
					twoStage, roundIn := upload(t, c, x), upload(t, c, x)
					xq, xs := uploadBytes(t, c, make([]byte, used*x8QuantBytes(k))), uploadBytes(t, c, make([]byte, used*x8ScaleBytes(k)))
					run(t, c, func(s *Seq) {
						s.QuantizeX8(hb.All(), xq.All(), xs.All(), k, used, X8Input{Q8K: x8Q8K(typ)})
						s.Barrier()
						s.MoEDownX8(typ, wqb.All(), xq.All(), xs.All(), twoStage.All(), ib.All(), wb.All(), shb.All(), gb.All(), k, n, used, shared)
						s.MoEDownX8RoundIn(typ, wqb.All(), hb.All(), roundIn.All(), ib.All(), wb.All(), shb.All(), gb.All(), k, n, used, shared)
					})
					want, got := readF32(t, twoStage, n), readF32(t, roundIn, n)
					for r := range want {
						if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
							t.Fatalf("row %d: rounding in gives %v, quantize_x8 then moe_down_x8 %v", r, got[r], want[r])
						}
					}
					if want[0] == x[0] {
						t.Fatalf("row 0 kept its residual %v: the products added nothing", x[0])
					}
				})
			}
		}
	}
}

// A qwen3moe decode step whose down products round the SwiGLU rows themselves
// (VKLLM_GPU_DOWN_ROUND_IN) has one barrier fewer a layer and the same logits bit for bit.
// Fails if the switch is not wired.
func TestMoEDecodeDownRoundsIn(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no int8 expert products", c.Info.Name)
	}
	withTier(t, c, false)
	defer func(x8, on bool) { c.x8, c.downRoundIn = x8, on }(c.x8, c.downRoundIn)
	c.x8 = true
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0} { // the tiny model's 128-wide expert rows leave Q4_K's down in Q5_0, which has no int8 product
		t.Run(typ.String(), func(t *testing.T) {
			m := loadTiny(t, "", "qwen3moe", typ, 9)
			kernel := x8Kernel("moe_down_x8_", typ) + "_ri"
			logits, barriers := decodeSwitched(t, c, m, kernel, func(on bool) { c.downRoundIn = on })
			if d := barriers[false] - barriers[true]; d != len(m.Layers) {
				t.Errorf("the decode step has %d barriers with the down products rounding in, %d without: want %d fewer", barriers[true], barriers[false], len(m.Layers))
			}
			if worst := maxAbsDiff(logits[false], logits[true]); worst != 0 {
				t.Fatalf("logits differ by up to %g from the rounding stage's", worst)
			}
		})
	}
}
