package vulkan

import (
	"fmt"
	"math/rand"
	"testing"
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
