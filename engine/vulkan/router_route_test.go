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
// Both routes (VKLLM_GPU_ROUTE_SUBGROUP off and on: router_route_f32 against moe_route, the
// _1sg4 variants against each other where they serve).
func TestRouterRouteEqualsProductThenRoute(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no subgroup arithmetic, so no router_route_f32", c.Info.Name)
	}
	defer func(on bool) { c.routeSubgroup = on }(c.routeSubgroup)
	for _, oneSubgroup := range []bool{false, true} {
		c.routeSubgroup = oneSubgroup
		testRouterRouteEqualsProductThenRoute(t, c)
	}
}

func testRouterRouteEqualsProductThenRoute(t *testing.T, c *Context) {
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
		// every lane of the four-slot one-subgroup route full
		{512, 4 * c.Info.SubgroupSize, min(8, c.Info.SubgroupSize), model.GatingSoftmax, true, 1, true},
	} {
		t.Run(fmt.Sprintf("%s/k%d/e%d/u%d/%v/norm%v/tie%v", c.routeKernel("router_route_f32", tc.experts), tc.k, tc.experts, tc.used, tc.gating, tc.norm, tc.tie), func(t *testing.T) {
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
	logits, barriers := decodeSwitched(t, c, m, c.routeKernel("router_route_f32", m.Hyper.MoE.Experts), func(on bool) { c.routerRoute = on })
	if d := barriers[false] - barriers[true]; d != len(m.Layers) {
		t.Errorf("the decode step has %d barriers with the router routing, %d without: want %d fewer", barriers[true], barriers[false], len(m.Layers))
	}
	if worst := maxAbsDiff(logits[false], logits[true]); worst != 0 {
		t.Fatalf("logits differ by up to %g from the route stage's", worst)
	}
}
