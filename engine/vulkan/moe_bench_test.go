package vulkan

import (
	"math/rand"
	"testing"

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
	c := ctxOrSkip(b)
	if c.Info.Type == "cpu" {
		b.Skipf("%s is a CPU device: its timings say nothing about a GPU", c.Info.Name)
	}
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
			best := bestNsPerRep(b, c, reps, func(s *Seq) {
				if m == 1 {
					s.MoEMatVecSwiGLU(typ, gateUp.All(), x.All(), g.All(), idb.All(), uint64(upOff), dim, ff, 0, ne, used, pairs, dim, ff)
					s.Barrier()
					s.MoEMatVec(typ, down.All(), g.All(), o.All(), idb.All(), ff, dim, 0, ne, used, pairs, true, ff, dim)
					return
				}
				s.MoEGroup(idb.All(), tiles.All(), sorted.All(), pairs, ne)
				s.Barrier()
				s.MoEGEMM(typ, gate.All(), x.All(), g.All(), tiles.All(), sorted.All(), dim, ff, 0, ne, used, pairs, ne, false, dim, ff)
				s.MoEGEMM(typ, up.All(), x.All(), u.All(), tiles.All(), sorted.All(), dim, ff, 0, ne, used, pairs, ne, false, dim, ff)
				s.Barrier()
				s.MoEGEMM(typ, down.All(), g.All(), o.All(), tiles.All(), sorted.All(), ff, dim, 0, ne, used, pairs, ne, true, ff, dim)
			}) / 1e3
			if m == 1 {
				bytes := float64(used * (2*upRow*ff + downRow*dim))
				b.Logf("%v decode: %.1f us for 8 experts' gate, up and down, %.0f GB/s of expert weights", typ, best, bytes/best/1e3)
			} else {
				b.Logf("%v prefill %d tokens: %.0f us for the grouped gate, up and down, %.0f tokens/s per layer", typ, m, best, float64(m)/best*1e6)
			}
			b.ReportMetric(best, typ.String()+"-m"+map[bool]string{true: "1", false: "512"}[m == 1]+"-us")
		}
	}
}

func u32Bytes(v []uint32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
	}
	return out
}
