package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// RopeKV (one dispatch) writes the same queries and cache words as Rope on q and k, a barrier
// and KVStore of k and v, to the last bit: both pairings, full and partial rotary dimensions,
// one token and a window, values rows of another width than the keys, a cache already holding
// rows before pos.
func TestRopeKVMatchesRopeThenKVStore(t *testing.T) {
	c := ctxOrSkip(t)
	for _, tc := range []struct {
		headDim, nHead, nKV, ropeDim, m, pos, vHead int
		neox                                        bool
	}{
		{64, 4, 2, 64, 1, 5, 64, false},
		{64, 4, 2, 64, 3, 0, 64, true},
		{128, 8, 2, 32, 5, 7, 128, true}, // partial rotary dimensions
		{32, 6, 3, 16, 2, 1, 48, false},  // value heads wider than the keys'
	} {
		t.Run(fmt.Sprintf("hd%d/heads%d-%d/rope%d/m%d/neox%v", tc.headDim, tc.nHead, tc.nKV, tc.ropeDim, tc.m, tc.neox), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(tc.headDim + tc.m)))
			qd, kd, vd := tc.nHead*tc.headDim, tc.nKV*tc.headDim, tc.nKV*tc.vHead
			q, k, v := randVec(rng, tc.m*qd, 1), randVec(rng, tc.m*kd, 1), randVec(rng, tc.m*vd, 1)
			cs := make([]float32, tc.m*tc.ropeDim)
			RopeAngles(cs, tc.pos, tc.m, tc.ropeDim, 10000, 1, nil)
			rows := tc.pos + tc.m + 2
			old := make([]uint32, rows*kd/2)
			for i := range old {
				old[i] = rng.Uint32() // rows the step must leave alone
			}
			oldV := make([]uint32, rows*vd/2)
			for i := range oldV {
				oldV[i] = rng.Uint32()
			}
			csb, pb := upload(t, c, cs), uploadU32(t, c, []uint32{uint32(tc.pos)})
			q1, k1, v1, kc1, vc1 := upload(t, c, q), upload(t, c, k), upload(t, c, v), uploadU32(t, c, old), uploadU32(t, c, oldV)
			q2, k2, v2, kc2, vc2 := upload(t, c, q), upload(t, c, k), upload(t, c, v), uploadU32(t, c, old), uploadU32(t, c, oldV)
			run(t, c, func(s *Seq) {
				s.Rope(q1.All(), csb.All(), tc.headDim, tc.nHead, tc.m, tc.ropeDim, tc.neox, qd)
				s.Rope(k1.All(), csb.All(), tc.headDim, tc.nKV, tc.m, tc.ropeDim, tc.neox, kd)
				s.Barrier()
				s.KVStore(k1.All(), kc1.All(), pb.All(), kd, tc.m, kd)
				s.KVStore(v1.All(), vc1.All(), pb.All(), vd, tc.m, vd)
			})
			run(t, c, func(s *Seq) {
				s.RopeKV(q2.All(), k2.All(), v2.All(), csb.All(), kc2.All(), vc2.All(), pb.All(), tc.headDim, tc.nHead, tc.m, tc.ropeDim, tc.neox, qd, kd, vd)
			})
			for i, w := range readF32(t, q1, tc.m*qd) {
				if g := readF32(t, q2, tc.m*qd)[i]; g != w {
					t.Fatalf("query %d: got %v, want %v", i, g, w)
				}
			}
			for _, cc := range []struct {
				name      string
				want, got *Buffer
				n         int
			}{{"key cache", kc1, kc2, rows * kd / 2}, {"value cache", vc1, vc2, rows * vd / 2}} {
				want, err := cc.want.ReadU32(0, cc.n)
				if err != nil {
					t.Fatal(err)
				}
				got, err := cc.got.ReadU32(0, cc.n)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s word %d: got %#x, want %#x", cc.name, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// RopeKVNorm (one dispatch) writes what the per-head norms (RMSNormHeads, the fast tier's
// rmsnorm_fast) then RopeKV write, within f32 rounding: every query within 1e-5 relative
// (max(1,|ref|): the two sum a head's squares in different orders), every key within one f16
// step of the two-stage key, the values and the cache rows outside the step bit for bit; full
// and partial rotary dimensions, both pairings, heads of 64, 128 and 256.
func TestRopeKVNormMatchesHeadNormsThenRopeKV(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, false)
	for _, tc := range []struct {
		headDim, nHead, nKV, ropeDim, m, pos int
		neox                                 bool
	}{
		{64, 4, 2, 64, 1, 5, false},
		{128, 8, 2, 32, 3, 7, true},    // partial rotary dimensions
		{256, 4, 2, 64, 2, 0, true},    // the hybrids' attention: 256-wide heads, 64 rotated
		{128, 32, 4, 128, 1, 90, true}, // a qwen3moe layer's decode step
	} {
		t.Run(fmt.Sprintf("hd%d/heads%d-%d/rope%d/m%d/neox%v", tc.headDim, tc.nHead, tc.nKV, tc.ropeDim, tc.m, tc.neox), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(3*tc.headDim + tc.m)))
			qd, kd := tc.nHead*tc.headDim, tc.nKV*tc.headDim
			q, k, v := randVec(rng, tc.m*qd, 2), randVec(rng, tc.m*kd, 2), randVec(rng, tc.m*kd, 1)
			qn, kn := randVec(rng, tc.headDim, 1), randVec(rng, tc.headDim, 1)
			cs := make([]float32, tc.m*tc.ropeDim)
			RopeAngles(cs, tc.pos, tc.m, tc.ropeDim, 10000, 1, nil)
			rows := tc.pos + tc.m + 2
			old := make([]uint32, rows*kd/2)
			for i := range old {
				old[i] = rng.Uint32() // rows the step must leave alone
			}
			csb, pb, qnb, knb := upload(t, c, cs), uploadU32(t, c, []uint32{uint32(tc.pos)}), upload(t, c, qn), upload(t, c, kn)
			q1, k1, v1, kc1, vc1 := upload(t, c, q), upload(t, c, k), upload(t, c, v), uploadU32(t, c, old), uploadU32(t, c, old)
			q2, k2, v2, kc2, vc2 := upload(t, c, q), upload(t, c, k), upload(t, c, v), uploadU32(t, c, old), uploadU32(t, c, old)
			const eps = 1e-6
			run(t, c, func(s *Seq) {
				s.RMSNormHeads(q1, qnb.All(), tc.headDim, tc.nHead, tc.m, eps)
				s.RMSNormHeads(k1, knb.All(), tc.headDim, tc.nKV, tc.m, eps)
				s.Barrier()
				s.RopeKV(q1.All(), k1.All(), v1.All(), csb.All(), kc1.All(), vc1.All(), pb.All(), tc.headDim, tc.nHead, tc.m, tc.ropeDim, tc.neox, qd, kd, kd)
			})
			run(t, c, func(s *Seq) {
				s.RopeKVNorm(q2.All(), k2.All(), v2.All(), csb.All(), kc2.All(), vc2.All(), pb.All(), qnb.All(), knb.All(),
					tc.headDim, tc.nHead, tc.m, tc.ropeDim, tc.neox, qd, kd, kd, eps)
			})
			want, got := readF32(t, q1, tc.m*qd), readF32(t, q2, tc.m*qd)
			for i := range want {
				if e := math.Abs(float64(got[i]-want[i])) / math.Max(1, math.Abs(float64(want[i]))); !(e <= 1e-5) {
					t.Fatalf("query %d: got %v, want %v", i, got[i], want[i])
				}
			}
			for _, cc := range []struct {
				name      string
				want, got *Buffer
				f16Step   bool
			}{{"key cache", kc1, kc2, true}, {"value cache", vc1, vc2, false}} {
				w, err := cc.want.ReadU32(0, rows*kd/2)
				if err != nil {
					t.Fatal(err)
				}
				g, err := cc.got.ReadU32(0, rows*kd/2)
				if err != nil {
					t.Fatal(err)
				}
				for i := range w {
					step := i >= tc.pos*kd/2 && i < (tc.pos+tc.m)*kd/2
					if g[i] == w[i] {
						continue
					}
					if !step || !cc.f16Step {
						t.Fatalf("%s word %d: got %#x, want %#x", cc.name, i, g[i], w[i])
					}
					for _, half := range []uint32{0, 16} {
						a, b := quant.F16ToF32(uint16(w[i]>>half)), quant.F16ToF32(uint16(g[i]>>half))
						if math.Abs(float64(a-b)) > math.Max(1, math.Abs(float64(a)))/1024 {
							t.Fatalf("%s word %d: half %v, want %v (one f16 step)", cc.name, i, b, a)
						}
					}
				}
			}
			if _, made := c.kernels["rope_kv_norm"]; !made {
				t.Fatal("rope_kv_norm was not made")
			}
		})
	}
}
