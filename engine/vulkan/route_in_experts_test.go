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

// With VKLLM_GPU_ROUTE_IN_EXPERTS a qwen3moe decode step's gate and up products choose the
// experts themselves (moe_matvec_x8r_<type>), on moe_route's arithmetic over the first 64
// threads of their workgroups, so the choice, the weights and so every logit equal those of the
// step with a route dispatch of its own, bit for bit, over a prompt and several greedy steps.
// Unplugged (the route kernel still run), the variant's kernel is never made and the test fails.
func TestRouteInExpertsEqualsTheRouteStage(t *testing.T) {
	c := ctxOrSkip(t)
	defer func(prev bool) { c.routeInExperts = prev }(c.routeInExperts)
	dir := t.TempDir()
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q8_0, quant.IQ2_XXS} {
		t.Run(typ.String(), func(t *testing.T) {
			m := loadTiny(t, dir, "qwen3moe", typ, 3)
			run := func(inside bool) (logits [][]float32, routes [][][]int) {
				c.routeInExperts = inside
				r, err := NewResident(c, m, ResidentOptions{Context: 64, CaptureRouting: true})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if x8Up, _ := r.moeTakesX8(r.layers[0].moe, 1); !x8Up {
					t.Skipf("%v experts do not take the int8 decode products on %q: no gate and up kernel to route in", typ, c.Info.Name)
				}
				l, err := r.Eval([]int{307, 321, 328}, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				for step := range 6 {
					logits = append(logits, l)
					if l, err = r.Eval([]int{argmax(l)}, 3+step, false); err != nil {
						t.Fatal(err)
					}
					rt, err := r.Routing(1)
					if err != nil {
						t.Fatal(err)
					}
					routes = append(routes, rt)
				}
				return logits, routes
			}
			suf, _ := weightSuffix(typ)
			forgetKernels(c, "moe_matvec_x8r_"+suf)
			wantL, wantR := run(false)
			if _, made := c.kernels["moe_matvec_x8r_"+suf]; made {
				t.Fatalf("the route stage's decode made moe_matvec_x8r_%s", suf)
			}
			gotL, gotR := run(true)
			if _, made := c.kernels["moe_matvec_x8r_"+suf]; !made {
				t.Fatalf("with the route in the experts, no decode step made moe_matvec_x8r_%s", suf)
			}
			for step := range wantL {
				if d := maxDiff(gotL[step], wantL[step]); d != 0 {
					t.Errorf("step %d: logits differ from the route stage's by %g", step, d)
				}
				if fmt.Sprint(gotR[step]) != fmt.Sprint(wantR[step]) {
					t.Errorf("step %d: routing %v, the route stage's %v", step, gotR[step], wantR[step])
				}
			}
		})
	}
}

// The route inside the gate and up products, at the router shapes moe_route is tested at
// (Qwen3-30B-A3B's 128 experts, 8 used, ties of the largest logit among them, each gating):
// its choice, weights and products equal moe_route's followed by moe_matvec_x8's, bit for bit.
func TestMoEMatVecX8RouteEqualsRouteThenProducts(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no moe_matvec_x8", c.Info.Name)
	}
	const n, k = 9, 256 // 9 rows: workgroups of 4 rows (Q4_K, NR 1) and a partial last one
	for _, tc := range []struct {
		experts, used int
		gating        model.Gating
		norm          bool
		scale         float32
		tie           bool
	}{
		{8, 2, model.GatingSoftmax, true, 1, false},
		{128, 8, model.GatingSoftmax, true, 1, true},
		{128, 8, model.GatingSigmoid, true, 2.5, false},
		{60, 6, model.GatingSoftmaxSelected, true, 1, true},
		{60, 4, model.GatingSoftmax, false, 1, false},
	} {
		t.Run(fmt.Sprintf("e%d/k%d/%v/norm%v/tie%v", tc.experts, tc.used, tc.gating, tc.norm, tc.tie), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(tc.experts*10 + tc.used)))
			logits := randVec(rng, tc.experts, 2)
			if tc.tie {
				best := slices.Index(logits, slices.Max(logits))
				for i := 1; i < tc.experts; i += 5 {
					logits[i] = logits[best]
				}
			}
			gq, _ := moeTestWeights(t, rng, quant.Q4_K, k, n, tc.experts)
			uq, _ := moeTestWeights(t, rng, quant.Q4_K, k, n, tc.experts)
			off := (len(gq) + 255) / 256 * 256
			both := make([]byte, off+len(uq))
			copy(both, gq)
			copy(both[off:], uq)
			wb, lb, xb := uploadBytes(t, c, both), upload(t, c, logits), upload(t, c, randVec(rng, k, 1))
			xq, xs := uploadBytes(t, c, make([]byte, x8QuantBytes(k))), uploadBytes(t, c, make([]byte, x8ScaleBytes(k)))
			type out struct {
				ids []uint32
				wts []float32
				y   []float32
			}
			eval := func(inside bool) out {
				ib, wtb, yb := zeros(t, c, tc.used), zeros(t, c, tc.used), upload(t, c, poisoned(tc.used*n))
				run(t, c, func(s *Seq) {
					s.QuantizeX8(xb.All(), xq.All(), xs.All(), k, 1, X8Input{})
					if inside {
						s.Barrier()
						s.MoEMatVecX8Route(quant.Q4_K, wb.All(), xq.All(), xs.All(), yb.All(), ib.All(), lb.All(), wtb.All(), uint64(off), k, n, tc.experts, tc.used, n, tc.gating, tc.norm, tc.scale)
						return
					}
					s.MoERoute(lb.All(), ib.All(), wtb.All(), tc.experts, tc.used, 1, tc.gating, tc.norm, tc.scale)
					s.Barrier()
					s.MoEMatVecX8(quant.Q4_K, wb.All(), xq.All(), xs.All(), yb.All(), ib.All(), uint64(off), k, n, 0, tc.experts, tc.used, tc.used, false, n)
				})
				ids, err := ib.ReadU32(0, tc.used)
				if err != nil {
					t.Fatal(err)
				}
				return out{ids, readF32(t, wtb, tc.used), readF32(t, yb, tc.used*n)}
			}
			want, got := eval(false), eval(true)
			if !slices.Equal(got.ids, want.ids) {
				t.Fatalf("experts %v, moe_route's %v", got.ids, want.ids)
			}
			for j := range want.wts {
				if math.Float32bits(got.wts[j]) != math.Float32bits(want.wts[j]) {
					t.Fatalf("weight %d: %v, moe_route's %v", j, got.wts[j], want.wts[j])
				}
			}
			for i := range want.y {
				if math.Float32bits(got.y[i]) != math.Float32bits(want.y[i]) {
					t.Fatalf("pair %d row %d: %v, after moe_route %v", i/n, i%n, got.y[i], want.y[i])
				}
			}
		})
	}
}
