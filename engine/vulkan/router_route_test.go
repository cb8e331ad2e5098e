package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// router_route_f32 is matvec_norm_f32's product followed by moe_route's choice, the route made
// by the router's last workgroup: its logits, choice and weights equal the two dispatches',
// bit for bit, at Qwen3-30B-A3B's router (2048 wide, 128 experts, 8 used) with ties among the
// largest logits (duplicated router rows), a row wider than the shared memory keeps (4096),
// and each gating. Two dispatches in one command check that the arrival count is left at 0.
func TestRouterRouteEqualsProductThenRoute(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no subgroup arithmetic, so no router_route_f32", c.Info.Name)
	}
	for _, tc := range []struct {
		k, experts, used int
		gating           model.Gating
		norm             bool
		scale            float32
		tie              bool
	}{
		{256, 8, 2, model.GatingSoftmax, true, 1, false},
		{2048, 128, 8, model.GatingSoftmax, true, 1, true},
		{2048, 128, 8, model.GatingSigmoid, true, 2.5, false},
		{4096, 60, 6, model.GatingSoftmaxSelected, true, 1, true},
		{512, 60, 4, model.GatingSoftmax, false, 1, false},
	} {
		t.Run(fmt.Sprintf("k%d/e%d/u%d/%v/norm%v/tie%v", tc.k, tc.experts, tc.used, tc.gating, tc.norm, tc.tie), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(tc.k + tc.experts*10 + tc.used)))
			w, g, x0 := randVec(rng, tc.k*tc.experts, 0.05), randVec(rng, tc.k, 1), randVec(rng, tc.k, 3)
			if tc.tie {
				// row 3 leans towards the first input (its largest logit), and rows 1, 6, 11, ..
				// copy it: equal logits, the lower index first
				for i := range tc.k {
					w[3*tc.k+i] = float32(0.02 * math.Copysign(1, float64(x0[i]*g[i])))
				}
				for e := 1; e < tc.experts; e += 5 {
					copy(w[e*tc.k:(e+1)*tc.k], w[3*tc.k:4*tc.k])
				}
			}
			wb, gb := upload(t, c, w), upload(t, c, g)
			xs := [2]*Buffer{upload(t, c, x0), upload(t, c, randVec(rng, tc.k, 0.5))}
			type out struct {
				logits []float32
				ids    []uint32
				wts    []float32
			}
			eval := func(fused bool) (outs [2]out) {
				arrivals := zeros(t, c, 1)
				var lb, ib, wtb [2]*Buffer
				for i := range xs {
					lb[i], ib[i], wtb[i] = upload(t, c, poisoned(tc.experts)), zeros(t, c, tc.used), zeros(t, c, tc.used)
				}
				run(t, c, func(s *Seq) {
					for i, xb := range xs {
						if fused {
							s.RouterRouteF32(wb.All(), xb.All(), gb.All(), lb[i].All(), ib[i].All(), wtb[i].All(), arrivals.All(),
								tc.k, tc.experts, tc.used, 1e-6, tc.gating, tc.norm, tc.scale)
						} else {
							s.MatVecNormF32(wb.All(), xb.All(), gb.All(), lb[i].All(), tc.k, tc.experts, 1e-6)
							s.Barrier()
							s.MoERoute(lb[i].All(), ib[i].All(), wtb[i].All(), tc.experts, tc.used, 1, tc.gating, tc.norm, tc.scale)
						}
						s.Barrier()
					}
				})
				for i := range xs {
					ids, err := ib[i].ReadU32(0, tc.used)
					if err != nil {
						t.Fatal(err)
					}
					outs[i] = out{readF32(t, lb[i], tc.experts), ids, readF32(t, wtb[i], tc.used)}
				}
				if left, err := arrivals.ReadU32(0, 1); err != nil || left[0] != 0 {
					t.Fatalf("the arrival count is left at %v (%v), not 0", left, err)
				}
				return outs
			}
			want, got := eval(false), eval(true)
			for i := range want {
				for e := range want[i].logits {
					if math.Float32bits(got[i].logits[e]) != math.Float32bits(want[i].logits[e]) {
						t.Fatalf("dispatch %d: logit %d %v, matvec_norm_f32's %v", i, e, got[i].logits[e], want[i].logits[e])
					}
				}
				if !slices.Equal(got[i].ids, want[i].ids) {
					t.Fatalf("dispatch %d: experts %v, moe_route's %v", i, got[i].ids, want[i].ids)
				}
				for j := range want[i].wts {
					if math.Float32bits(got[i].wts[j]) != math.Float32bits(want[i].wts[j]) {
						t.Fatalf("dispatch %d: weight %d %v, moe_route's %v", i, j, got[i].wts[j], want[i].wts[j])
					}
				}
			}
			if tc.tie && (want[0].ids[0] != 1 || want[0].ids[1] != 3) {
				t.Fatalf("the tied rows were not chosen first (choices %v): the ties went untested", want[0].ids)
			}
		})
	}
}

// A qwen3moe decode step whose router normalizes itself routes in the router's dispatch
// (VKLLM_GPU_ROUTER_ROUTE): one barrier fewer a layer, and the same logits bit for bit (the
// same product and the same choice). Fails if not wired.
func TestMoEDecodeRouterRoutes(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no int8 expert products", c.Info.Name)
	}
	withTier(t, c, false)
	defer func(x8, norm, on bool) { c.x8, c.routerNorm, c.routerRoute = x8, norm, on }(c.x8, c.routerNorm, c.routerRoute)
	c.x8, c.routerNorm = true, true
	m := loadTiny(t, "", "qwen3moe", quant.Q4_K, 9)
	logits, barriers := decodeSwitched(t, c, m, "router_route_f32", func(on bool) { c.routerRoute = on })
	if d := barriers[false] - barriers[true]; d != len(m.Layers) {
		t.Errorf("the decode step has %d barriers with the router routing, %d without: want %d fewer", barriers[true], barriers[false], len(m.Layers))
	}
	if worst := maxAbsDiff(logits[false], logits[true]); worst != 0 {
		t.Fatalf("logits differ by up to %g from the route stage's", worst)
	}
}

// moe_matvec_x8q is moe_matvec_x8's gate and up products with each pair's SwiGLU row rounded
// for the down products by the pair's last workgroup: its rows, and its rounding's bytes,
// equal the products' followed by quantize_x8's, bit for bit, for 32-blocks and Q8_K's
// 256-blocks, rows of one pass and of several (a partial last one), Qwen3-30B-A3B's 8 pairs of
// 768 rows, and a type of each kernel family. Two dispatches in one command check that the
// pairs' arrival counts are left at 0.
func TestMoEMatVecX8RoundEqualsProductsThenRounding(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no moe_matvec_x8", c.Info.Name)
	}
	for _, tc := range []struct {
		typ               quant.Type
		k, n, experts, used int
		q8k               bool
	}{
		{quant.Q4_K, 256, 768, 16, 8, true},
		{quant.Q4_K, 256, 768, 16, 8, false},
		{quant.Q8_0, 64, 96, 4, 2, false},
		{quant.IQ2_XXS, 256, 512, 6, 3, true},
		{quant.Q4_0, 128, 1056, 5, 2, false},
	} {
		t.Run(fmt.Sprintf("%v/k%d/n%d/u%d/q8k%v", tc.typ, tc.k, tc.n, tc.used, tc.q8k), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(tc.k + tc.n + tc.used)))
			gq, _ := moeTestWeights(t, rng, tc.typ, tc.k, tc.n, tc.experts)
			uq, _ := moeTestWeights(t, rng, tc.typ, tc.k, tc.n, tc.experts)
			off := (len(gq) + 255) / 256 * 256
			both := make([]byte, off+len(uq))
			copy(both, gq)
			copy(both[off:], uq)
			ids := rng.Perm(tc.experts)[:tc.used]
			idsU := make([]uint32, tc.used)
			for j, e := range ids {
				idsU[j] = uint32(e)
			}
			wb, ib := uploadBytes(t, c, both), uploadU32(t, c, idsU)
			xs := [2]*Buffer{upload(t, c, randVec(rng, tc.k, 1)), upload(t, c, randVec(rng, tc.k, 4))}
			xq, xsc := uploadBytes(t, c, make([]byte, 2*x8QuantBytes(tc.k))), uploadBytes(t, c, make([]byte, 2*x8ScaleBytes(tc.k)))
			hqBytes, hsBytes := tc.used*x8QuantBytes(tc.n), tc.used*x8ScaleBytes(tc.n)
			type out struct {
				y      []float32
				hq, hs []byte
			}
			eval := func(fused bool) (outs [2]out) {
				arrivals := zeros(t, c, tc.used)
				var yb, hq, hs [2]*Buffer
				for i := range xs {
					yb[i] = upload(t, c, poisoned(tc.used*tc.n))
					hq[i], hs[i] = uploadBytes(t, c, make([]byte, hqBytes)), uploadBytes(t, c, make([]byte, hsBytes))
				}
				run(t, c, func(s *Seq) {
					for i, xb := range xs {
						xqi := xq.Range(uint64(i*x8QuantBytes(tc.k)), uint64(x8QuantBytes(tc.k)))
						xsi := xsc.Range(uint64(i*x8ScaleBytes(tc.k)), uint64(x8ScaleBytes(tc.k)))
						s.QuantizeX8(xb.All(), xqi, xsi, tc.k, 1, X8Input{Q8K: x8Q8K(tc.typ)})
						s.Barrier()
						if fused {
							s.MoEMatVecX8Round(tc.typ, wb.All(), xqi, xsi, yb[i].All(), ib.All(), hq[i].All(), hs[i].All(), arrivals.All(),
								uint64(off), tc.k, tc.n, tc.experts, tc.used, tc.n, tc.q8k)
						} else {
							s.MoEMatVecX8(tc.typ, wb.All(), xqi, xsi, yb[i].All(), ib.All(), uint64(off), tc.k, tc.n, 0, tc.experts, tc.used, tc.used, false, tc.n)
							s.Barrier()
							s.QuantizeX8(yb[i].All(), hq[i].All(), hs[i].All(), tc.n, tc.used, X8Input{Q8K: tc.q8k})
						}
						s.Barrier()
					}
				})
				for i := range xs {
					q, err := hq[i].Read(0, uint64(hqBytes))
					if err != nil {
						t.Fatal(err)
					}
					sc, err := hs[i].Read(0, uint64(hsBytes))
					if err != nil {
						t.Fatal(err)
					}
					outs[i] = out{readF32(t, yb[i], tc.used*tc.n), q, sc}
				}
				if left, err := arrivals.ReadU32(0, tc.used); err != nil || slices.ContainsFunc(left, func(v uint32) bool { return v != 0 }) {
					t.Fatalf("the arrival counts are left at %v (%v), not 0", left, err)
				}
				return outs
			}
			want, got := eval(false), eval(true)
			for i := range want {
				for r := range want[i].y {
					if math.Float32bits(got[i].y[r]) != math.Float32bits(want[i].y[r]) {
						t.Fatalf("dispatch %d: pair %d row %d %v, moe_matvec_x8's %v", i, r/tc.n, r%tc.n, got[i].y[r], want[i].y[r])
					}
				}
				if j := mismatchAt(got[i].hq, want[i].hq); j >= 0 {
					t.Fatalf("dispatch %d: rounded byte %d is %d, quantize_x8's %d", i, j, int8(got[i].hq[j]), int8(want[i].hq[j]))
				}
				if j := mismatchAt(got[i].hs, want[i].hs); j >= 0 {
					t.Fatalf("dispatch %d: scale and sum byte %d differ from quantize_x8's (block %d)", i, j, j/8)
				}
			}
		})
	}
}

// mismatchAt is the first index where a and b differ, or -1.
func mismatchAt(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// A qwen3moe decode step on the int8 products rounds each pair's SwiGLU row in the gate and up
// products' dispatch (VKLLM_GPU_ROUND_IN_EXPERTS): one barrier fewer a layer, the same logits
// bit for bit. Fails if not wired. (The tiny models' expert rows are too short for Q8_K's
// 256-blocks, so the K-quants' rounding is the kernel test's above.)
func TestMoEDecodeRoundsInExperts(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no int8 expert products", c.Info.Name)
	}
	withTier(t, c, false)
	defer func(x8, on bool) { c.x8, c.roundInExperts = x8, on }(c.x8, c.roundInExperts)
	c.x8 = true
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0} {
		t.Run(typ.String(), func(t *testing.T) {
			m := loadTiny(t, "", "qwen3moe", typ, 9)
			suf, _ := weightSuffix(typ)
			logits, barriers := decodeSwitched(t, c, m, "moe_matvec_x8q_"+suf, func(on bool) { c.roundInExperts = on })
			if d := barriers[false] - barriers[true]; d != len(m.Layers) {
				t.Errorf("the decode step has %d barriers with the rounding in the experts, %d without: want %d fewer", barriers[true], barriers[false], len(m.Layers))
			}
			if worst := maxAbsDiff(logits[false], logits[true]); worst != 0 {
				t.Fatalf("logits differ by up to %g from the rounding stage's", worst)
			}
		})
	}
}
