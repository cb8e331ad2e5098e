package vulkan

import (
	"fmt"
	"testing"

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
