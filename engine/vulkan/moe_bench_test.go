package vulkan

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// BenchmarkMoEExperts times one mixture-of-experts layer's expert products on Qwen3-30B-A3B's
// shapes (dim 2048, 128 experts of width 768, 8 used per token): a decode step's gate+up+SwiGLU
// and down per (token, slot) pair (moe_matvec), and a 512-token prefill window grouped by expert
// (moe_group, then moe_gemm), GPU time from timestamps over 8 passes per submit, each product
// followed by a barrier as in the token command. Decode reports the experts' weight bytes read
// per second; prefill tokens per second of the three products. Random bytes stand in for the
// weights and random distinct experts for the routing. Run on a real GPU:
// -test.run '^$' -test.bench MoEExperts -test.benchtime 3x.
func BenchmarkMoEExperts(b *testing.B) {
	c := gpuCtxOrSkip(b)
	const dim, ne, ff, used, reps = 2048, 128, 768, 8, 8
	rng := rand.New(rand.NewSource(4))
	for _, typ := range []quant.Type{quant.Q4_K, quant.IQ2_XXS, quant.Q8_0} {
		upRow, err := typ.RowBytes(dim)
		if err != nil {
			b.Fatal(err)
		}
		downRow, err := typ.RowBytes(ff)
		if err != nil {
			b.Fatal(err)
		}
		random := func(n int) *Buffer {
			w := make([]byte, n)
			rng.Read(w)
			return benchBuffer(b, c, w)
		}
		gate, up, down := random(upRow*ff*ne), random(upRow*ff*ne), random(downRow*dim*ne)
		upOff := (upRow*ff*ne + 255) / 256 * 256
		gateUp := random(2 * upOff) // the resident layout: up experts upOff bytes after the gate's
		for _, m := range []int{1, 512} {
			pairs := m * used
			ids := make([]uint32, pairs)
			for t := 0; t < m; t++ {
				for j, e := range rng.Perm(ne)[:used] {
					ids[t*used+j] = uint32(e)
				}
			}
			idb := benchBuffer(b, c, u32Bytes(ids))
			x := benchBuffer(b, c, f32Bytes(randVec(rng, m*dim, 1)))
			g, u := benchBuffer(b, c, make([]byte, 4*pairs*ff)), benchBuffer(b, c, make([]byte, 4*pairs*ff))
			o := benchBuffer(b, c, make([]byte, 4*pairs*dim))
			tiles := benchBuffer(b, c, make([]byte, 4*(1+3*moeMaxTiles(pairs, ne))))
			sorted := benchBuffer(b, c, make([]byte, 4*pairs))
			tilePairs := c.moeGroupTile(typ, typ, typ, dim, ff) // the grouping moeFFN takes
			best := bestNsPerRep(b, c, reps, func(s *Seq) {
				if m == 1 {
					s.MoEMatVecSwiGLU(typ, gateUp.All(), x.All(), g.All(), idb.All(), uint64(upOff), dim, ff, 0, ne, used, pairs, dim, ff)
					s.Barrier()
					s.MoEMatVec(typ, down.All(), g.All(), o.All(), idb.All(), ff, dim, 0, ne, used, pairs, true, ff, dim)
					return
				}
				s.MoEGroupTiles(idb.All(), tiles.All(), sorted.All(), pairs, ne, tilePairs)
				s.Barrier()
				s.MoEGEMM(typ, gate.All(), x.All(), g.All(), tiles.All(), sorted.All(), dim, ff, 0, ne, used, pairs, ne, tilePairs, false, dim, ff)
				s.MoEGEMM(typ, up.All(), x.All(), u.All(), tiles.All(), sorted.All(), dim, ff, 0, ne, used, pairs, ne, tilePairs, false, dim, ff)
				s.Barrier()
				s.MoEGEMM(typ, down.All(), g.All(), o.All(), tiles.All(), sorted.All(), ff, dim, 0, ne, used, pairs, ne, tilePairs, true, ff, dim)
			}) / 1e3
			if m > 1 && typ == quant.Q4_K { // the grouping alone (one workgroup), once
				group := bestNsPerRep(b, c, reps, func(s *Seq) { s.MoEGroup(idb.All(), tiles.All(), sorted.All(), pairs, ne) }) / 1e3
				b.Logf("moe_group of %d pairs over %d experts: %.0f us (with its barrier)", pairs, ne, group)
			}
			if m == 1 {
				bytes := float64(used * (2*upRow*ff + downRow*dim))
				b.Logf("%v decode: %.1f us for 8 experts' gate, up and down, %.0f GB/s of expert weights", typ, best, bytes/best/1e3)
			} else {
				b.Logf("%v prefill %d tokens in tiles of %d pairs: %.0f us for the grouped gate, up and down, %.0f tokens/s per layer", typ, m, tilePairs, best, float64(m)/best*1e6)
			}
			b.ReportMetric(best, typ.String()+"-m"+map[bool]string{true: "1", false: "512"}[m == 1]+"-us")
			if m == 1 {
				benchMoEDecodeX8(b, c, typ, gateUp, down, idb, uint64(upOff), upRow, downRow)
			}
		}
	}
}

// benchMoEDecodeX8 times the fast tier's decode products of one MoE layer as the token command
// records them, stage by stage (each followed by its barrier): the token's input rounded once
// (quantize_x8), the gate and up experts with SwiGLU at once (moe_matvec_x8 with the up
// experts' offset), their outputs rounded (quantize_x8 over 8 rows), the down experts adding
// the router's combine into the residual (moe_down_x8). Each stage's µs and the weight bytes
// it reads a second: what a MoE decode step's time (30B-A3B: ~34 µs a layer for gate and up at
// 128 positions, at 2 TB/s that would be 7) goes to, kernel or stage.
func benchMoEDecodeX8(b *testing.B, c *Context, typ quant.Type, gateUp, down, ids *Buffer, upOff uint64, upRow, downRow int) {
	const dim, ne, ff, used, reps = 2048, 128, 768, 8, 8
	if x8Kernel("moe_matvec_x8_", typ) == "" || x8Kernel("moe_down_x8_", typ) == "" || !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		b.Logf("%v: no int8 MoE decode kernels here", typ)
		return
	}
	rng := rand.New(rand.NewSource(5))
	q8k := x8Q8K(typ)
	x := benchBuffer(b, c, f32Bytes(randVec(rng, dim, 1)))
	res := benchBuffer(b, c, f32Bytes(randVec(rng, dim, 1)))
	xq, xs := benchBuffer(b, c, make([]byte, x8QuantBytes(dim))), benchBuffer(b, c, make([]byte, x8ScaleBytes(dim)))
	hid := benchBuffer(b, c, make([]byte, 4*used*ff))
	hq, hs := benchBuffer(b, c, make([]byte, used*x8QuantBytes(ff))), benchBuffer(b, c, make([]byte, used*x8ScaleBytes(ff)))
	wts := benchBuffer(b, c, f32Bytes(randVec(rng, used, 1)))
	stages := []struct {
		name  string
		bytes int
		rec   func(s *Seq)
	}{
		{"quantize_x8 (the input)", 0, func(s *Seq) { s.QuantizeX8(x.All(), xq.All(), xs.All(), dim, 1, X8Input{Q8K: q8k}) }},
		{"moe_matvec_x8 gate+up+SwiGLU", used * 2 * upRow * ff, func(s *Seq) {
			s.MoEMatVecX8(typ, gateUp.All(), xq.All(), xs.All(), hid.All(), ids.All(), upOff, dim, ff, 0, ne, used, used, false, ff)
		}},
		{"quantize_x8 (8 hidden rows)", 0, func(s *Seq) { s.QuantizeX8(hid.All(), hq.All(), hs.All(), ff, used, X8Input{Q8K: q8k && ff%256 == 0}) }},
		{"moe_down_x8 + combine", used * downRow * dim, func(s *Seq) {
			s.MoEDownX8(typ, down.All(), hq.All(), hs.All(), res.All(), ids.All(), wts.All(), res.All(), res.All(), ff, dim, used, false)
		}},
	}
	total := 0.0
	for _, st := range stages {
		us := bestNsPerRep(b, c, reps, func(s *Seq) { st.rec(s) }) / 1e3
		total += us
		if st.bytes > 0 {
			b.Logf("%v decode x8: %s %.1f us, %.0f GB/s of expert weights", typ, st.name, us, float64(st.bytes)/us/1e3)
		} else {
			b.Logf("%v decode x8: %s %.1f us", typ, st.name, us)
		}
	}
	b.Logf("%v decode x8: %.1f us a layer's experts in all", typ, total)
	b.ReportMetric(total, typ.String()+"-x8-m1-us")
}

func u32Bytes(v []uint32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
	}
	return out
}

// BenchmarkMoERoute times a decode step's routing (moe_route, one token) on Qwen3-30B-A3B's 128
// experts and the Qwen3.5/3.6 MoEs' 256, 8 used, softmax with renormalisation, each followed
// by a barrier as in the token command, beside a barrier alone: the 30B-A3B's decode profile
// on the H200 gave the route stage ~20 µs a layer, about 12 more than a stage as small as
// rope_kv. Then the router's normed product (matvec_norm_f32, 2048 wide) alone and followed by
// moe_route (the two stages a decode step records), and the decode step's normed int8 rounding
// (quantize_x8 with the norm) of 2048 and 4096: the small stages whose time is latency; and
// router_route_f32, the product and route in one dispatch as the decode step records them.
// Under VKLLM_GPU_ROUTE_SUBGROUP=1 (the default) the routes are the one-subgroup variants (_1sg4) where they hold the experts.
// Run on a real GPU: -test.run '^$' -test.bench MoERoute -test.benchtime 3x (the lines it
// prints start with the kernel's name, not "Benchmark").
func BenchmarkMoERoute(b *testing.B) {
	c := gpuCtxOrSkip(b)
	const reps, used = 32, 8
	rng := rand.New(rand.NewSource(5))
	ids, wts := benchBuffer(b, c, make([]byte, 4*used)), benchBuffer(b, c, make([]byte, 4*used))
	barrier := bestNsPerRep(b, c, reps, func(s *Seq) {})
	fmt.Printf("barrier alone: %.2f us\n", barrier/1e3)
	for _, experts := range []int{128, 256} {
		logits := benchBuffer(b, c, f32Bytes(randVec(rng, experts, 2)))
		ns := bestNsPerRep(b, c, reps, func(s *Seq) {
			s.MoERoute(logits.All(), ids.All(), wts.All(), experts, used, 1, model.GatingSoftmax, true, 1)
		})
		fmt.Printf("moe_route %d experts, %d used, one token: %.2f us (with its barrier)\n", experts, used, ns/1e3)
	}
	const dim = 2048
	x, g := benchBuffer(b, c, f32Bytes(randVec(rng, dim, 1))), benchBuffer(b, c, f32Bytes(randVec(rng, dim, 1)))
	for _, experts := range []int{128, 256} {
		w := benchBuffer(b, c, f32Bytes(randVec(rng, experts*dim, 0.05)))
		logits := benchBuffer(b, c, make([]byte, 4*experts))
		product := bestNsPerRep(b, c, reps, func(s *Seq) {
			s.MatVecNormF32(w.All(), x.All(), g.All(), logits.All(), dim, experts, 1e-6)
		})
		apart := bestNsPerRep(b, c, reps, func(s *Seq) {
			s.MatVecNormF32(w.All(), x.All(), g.All(), logits.All(), dim, experts, 1e-6)
			s.Barrier()
			s.MoERoute(logits.All(), ids.All(), wts.All(), experts, used, 1, model.GatingSoftmax, true, 1)
		})
		arrivals := benchBuffer(b, c, make([]byte, 4)) // router_route_f32 leaves its count at 0
		fused := bestNsPerRep(b, c, reps, func(s *Seq) {
			s.RouterRouteF32(w.All(), x.All(), g.All(), logits.All(), ids.All(), wts.All(), arrivals.All(), dim, experts, used, 1e-6, model.GatingSoftmax, true, 1)
		})
		fmt.Printf("router %dx%d f32 normed product: %.2f us (%.0f GB/s); product then moe_route: %.2f us; %s: %.2f us\n",
			experts, dim, product/1e3, float64(4*experts*dim)/product, apart/1e3, c.routeKernel("router_route_f32", experts), fused/1e3)
	}
	for _, k := range []int{2048, 4096} {
		xk, gk := benchBuffer(b, c, f32Bytes(randVec(rng, k, 1))), benchBuffer(b, c, f32Bytes(randVec(rng, k, 1)))
		q, sc := benchBuffer(b, c, make([]byte, x8QuantBytes(k))), benchBuffer(b, c, make([]byte, x8ScaleBytes(k)))
		gb := gk.All()
		ns := bestNsPerRep(b, c, reps, func(s *Seq) {
			s.QuantizeX8(xk.All(), q.All(), sc.All(), k, 1, X8Input{Norm: &gb, Eps: 1e-6})
		})
		fmt.Printf("quantize_x8 with the norm, one row of %d: %.2f us (with its barrier)\n", k, ns/1e3)
	}
}
