package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// AddBias adds the bias vector to every row, in float32 (Y + B rounded once, exactly the CPU's
// x += b), for row counts that cover one and several workgroups.
func TestAddBiasAddsTheVectorToEveryRow(t *testing.T) {
	c := ctxOrSkip(t)
	rng := rand.New(rand.NewSource(3))
	for _, tc := range []struct{ n, m int }{{64, 1}, {96, 5}, {1000, 3}} {
		t.Run(fmt.Sprintf("%dx%d", tc.m, tc.n), func(t *testing.T) {
			y, b := randVec(rng, tc.n*tc.m, 2), randVec(rng, tc.n, 1)
			yb, bb := upload(t, c, y), upload(t, c, b)
			run(t, c, func(s *Seq) { s.AddBias(bb.All(), yb.All(), tc.n, tc.m) })
			got := readF32(t, yb, tc.n*tc.m)
			for i, v := range y {
				if want := v + b[i%tc.n]; got[i] != want {
					t.Fatalf("element %d (row %d): got %v, want exactly %v", i, i/tc.n, got[i], want)
				}
			}
		})
	}
}

// RMSNormHeads normalizes every head of every row in place with the shared weight, as the CPU
// reference's rmsNormHeads does: to the last bit on lavapipe (correctly rounded division and
// square root), within 1e-5 relative elsewhere.
func TestRMSNormHeadsNormalizesEachHeadInPlace(t *testing.T) {
	c := ctxOrSkip(t)
	exact := c.Info.Type == "cpu" && c.exact // the exact tier's RMSNorm is the CPU's to the bit on lavapipe
	rng := rand.New(rand.NewSource(4))
	const eps = 1e-6
	for _, tc := range []struct{ headDim, heads, m int }{{64, 4, 1}, {128, 2, 7}, {32, 3, 5}} {
		t.Run(fmt.Sprintf("%dx%dx%d", tc.m, tc.heads, tc.headDim), func(t *testing.T) {
			n := tc.headDim * tc.heads * tc.m
			x, g := randVec(rng, n, 3), randVec(rng, tc.headDim, 1)
			xb, gb := upload(t, c, x), upload(t, c, g)
			run(t, c, func(s *Seq) { s.RMSNormHeads(xb, gb.All(), tc.headDim, tc.heads, tc.m, eps) })
			got := readF32(t, xb, n)
			for h0 := 0; h0 < n; h0 += tc.headDim {
				head := x[h0 : h0+tc.headDim]
				var sum float64
				for _, v := range head {
					sum += float64(v * v)
				}
				mean := float32(sum / float64(tc.headDim))
				scale := 1 / float32(math.Sqrt(float64(mean+eps)))
				for i, v := range head {
					want := v * scale * g[i]
					d := math.Abs(float64(got[h0+i] - want))
					if (exact && d != 0) || d > 1e-5*math.Max(1, math.Abs(float64(want))) {
						t.Fatalf("head %d element %d: got %v, want %v (exact %v)", h0/tc.headDim, i, got[h0+i], want, exact)
					}
				}
			}
		})
	}
}
