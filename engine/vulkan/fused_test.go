package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// fusedRoundRef rounds one token's activations v (already normalized) as matvec_dec does for
// weights of type t, in float32 like the kernel: Q8_0 32-blocks for Q4_0/Q8_0 (d = f16(amax/127),
// q = roundEven(v·127/amax)), Q8_K 256-blocks for the K-quants (iscale = -127/max with max the
// first element of largest magnitude, q = min(127, roundEven(v·iscale)), d = 1/iscale). It
// returns the rounded values q·d and, per element, how far the kernel's own rounding may move it
// (one step where v·scale lies within 2e-3 of a rounding boundary: the GPU's division and the
// norm's sum order differ from Go's in the last bits) plus, per block, whether the scale itself
// sits on an f16 rounding boundary (its whole block may then be off by 2^-11 relative).
func fusedRoundRef(t quant.Type, v []float32) (xr, slack []float64, blockFragile []bool) {
	block := 256
	if t == quant.Q4_0 || t == quant.Q8_0 {
		block = 32
	}
	xr, slack = make([]float64, len(v)), make([]float64, len(v))
	blockFragile = make([]bool, len(v)/block)
	for b := 0; b < len(v)/block; b++ {
		seg := v[b*block : (b+1)*block]
		var amax, maxv float32
		for _, e := range seg {
			if a := float32(math.Abs(float64(e))); a > amax {
				amax, maxv = a, e
			}
		}
		if amax == 0 {
			continue
		}
		var inv, d float32
		if block == 32 {
			inv = 127 / amax
			d = quant.F16ToF32(quant.F32ToF16(amax / 127))
			lo, hi := quant.F32ToF16(amax/127*(1-1e-5)), quant.F32ToF16(amax/127*(1+1e-5))
			blockFragile[b] = lo != hi
		} else {
			inv = -127 / maxv
			d = 1 / inv
		}
		for i, e := range seg {
			s := e * inv
			q := float32(math.RoundToEven(float64(s)))
			q = min(q, 127)
			xr[b*block+i] = float64(q) * float64(d)
			frac := math.Abs(float64(s)) - math.Floor(math.Abs(float64(s)))
			if math.Abs(frac-0.5) < 2e-3 {
				slack[b*block+i] = math.Abs(float64(d))
			}
		}
	}
	return xr, slack, blockFragile
}

// The fused decode product (matvec_dec) against a float64 reference on the activations rounded
// as it rounds them, for every type it covers: plain, accumulating, with the RMSNorm in its
// prologue, and gate+up+SwiGLU paired; on grids that share rows among a workgroup's subgroups
// and on grids where each subgroup has its own rows. Bound per output: 1e-5·Σ|w·x| (f32 sums of
// exact integer unit products) plus, where the kernel's rounding of an element may legitimately
// differ by one step (see fusedRoundRef), that step times |w|; with the norm, 2^-10·Σ|w·x| over
// a block whose f16 scale sits on a rounding boundary.
func TestFusedDecodeProductMatchesFloat64Reference(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, false)
	if !c.fusedDecode {
		t.Skipf("%s: the fused decode product needs int8 dot products and subgroups of 8-128 (or VKLLM_GPU_FUSED=0)", c.Info.Name)
	}
	const n, eps = 37, 1e-5
	for _, k := range []int{512, 1280} {
		for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
			for _, mode := range []string{"plain", "accumulate", "norm", "norm+pair"} {
				for _, ownRows := range []bool{false, true} {
					name := fmt.Sprintf("k%d/%v/%s", k, typ, mode)
					if ownRows {
						name += "/own-rows"
					}
					t.Run(name, func(t *testing.T) {
						prevShare := c.matvecShareBelow
						if ownRows {
							c.matvecShareBelow = 0
						}
						defer func() { c.matvecShareBelow = prevShare }()
						rng := rand.New(rand.NewSource(int64(typ)*1000 + int64(k)))
						weights := func() ([]byte, []float32) {
							wq, err := quant.Quantize(typ, randVec(rng, k*n, 0.5))
							if err != nil {
								t.Fatal(err)
							}
							wd := make([]float32, k*n)
							if err := quant.Dequantize(typ, wq, wd); err != nil {
								t.Fatal(err)
							}
							return wq, wd
						}
						wq, wd := weights()
						wq2, wd2 := weights()
						x, g := randVec(rng, k, 2), randVec(rng, k, 1)
						norm, pair := mode == "norm" || mode == "norm+pair", mode == "norm+pair"
						v := x
						if norm {
							var ss float64
							for _, e := range x {
								ss += float64(e) * float64(e)
							}
							scale := float32(1 / math.Sqrt(ss/float64(k)+eps))
							v = make([]float32, k)
							for i := range x {
								v[i] = x[i] * scale * g[i]
							}
						}
						xr, slack, fragile := fusedRoundRef(typ, v)
						block := k / len(fragile)
						ref := func(wd []float32, r int) (sum, tol float64) {
							var mag, extra float64
							for i := 0; i < k; i++ {
								p := float64(wd[r*k+i]) * xr[i]
								sum += p
								mag += math.Abs(p)
								extra += math.Abs(float64(wd[r*k+i])) * slack[i]
								if norm && fragile[i/block] {
									extra += math.Abs(p) / 1024
								}
							}
							return sum, 1e-5*mag + extra + 1e-6
						}
						start := make([]float32, n)
						for i := range start {
							start[i] = 1
						}
						wb, w2b, xb, gb, yb := uploadBytes(t, c, wq), uploadBytes(t, c, wq2), upload(t, c, x), upload(t, c, g), upload(t, c, start)
						opt := FusedDecodeOptions{Accumulate: mode == "accumulate", Eps: eps}
						if norm {
							b := gb.All()
							opt.Norm = &b
						}
						if pair {
							b := w2b.All()
							opt.Pair = &b
						}
						run(t, c, func(s *Seq) { s.MatVecFused(typ, wb.All(), xb.All(), yb.All(), k, n, opt) })
						got := readF32(t, yb, n)
						for r := 0; r < n; r++ {
							want, tol := ref(wd, r)
							if opt.Accumulate {
								want++
							}
							if pair {
								u, tolU := ref(wd2, r)
								sg := want / (1 + math.Exp(-want))
								tol = 1.1*tol*math.Abs(u) + math.Abs(sg)*tolU + 1.1*tol*tolU + 1e-6*math.Abs(sg*u)
								want = sg * u
							}
							if e := math.Abs(float64(got[r]) - want); !(e <= tol) { // NaN fails too
								t.Fatalf("row %d: got %v, want %v (tol %.3g)", r, got[r], want, tol)
							}
						}
					})
				}
			}
		}
	}
}

// The two-units-a-pass decode products (matvec_fast2_) against float64, as the one-unit ones are
// checked in TestMatMulMatchesDequantizedReferenceForEveryWeightType: rows of 512 and 1280
// elements (1280: some lanes' second unit lies past the row's end and must count nothing), on
// shared and own rows. Bound: 1e-5·Σ|w·x| + 1e-6.
func TestTwoUnitDecodeProductMatchesFloat64Reference(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, false)
	prevUnits := c.matvecUnits
	c.matvecUnits = 2
	t.Cleanup(func() { c.matvecUnits = prevUnits })
	const n = 37
	for _, k := range []int{512, 1280} {
		for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
			for _, ownRows := range []bool{false, true} {
				name := fmt.Sprintf("k%d/%v", k, typ)
				if ownRows {
					name += "/own-rows"
				}
				t.Run(name, func(t *testing.T) {
					prevShare := c.matvecShareBelow
					if ownRows {
						c.matvecShareBelow = 0
					}
					defer func() { c.matvecShareBelow = prevShare }()
					rng := rand.New(rand.NewSource(int64(typ)*10 + int64(k)))
					wq, err := quant.Quantize(typ, randVec(rng, k*n, 0.5))
					if err != nil {
						t.Fatal(err)
					}
					wd := make([]float32, k*n)
					if err := quant.Dequantize(typ, wq, wd); err != nil {
						t.Fatal(err)
					}
					x := randVec(rng, k, 1)
					if typ == quant.Q4_0 || typ == quant.Q8_0 {
						x = roundedQ8_0(t, x, k)
					}
					wb, xb, yb := uploadBytes(t, c, wq), upload(t, c, x), upload(t, c, poisoned(n))
					run(t, c, func(s *Seq) { s.MatMul(typ, wb.All(), xb.All(), yb.All(), k, n, 1, k, n, false) })
					if _, made := c.kernels["matvec_fast2_"+strings.ToLower(typ.String())]; !made {
						t.Fatalf("the product did not take matvec_fast2_%s", strings.ToLower(typ.String()))
					}
					got := readF32(t, yb, n)
					for r := 0; r < n; r++ {
						var ref, mag float64
						for i := 0; i < k; i++ {
							p := float64(wd[r*k+i]) * float64(x[i])
							ref += p
							mag += math.Abs(p)
						}
						if e := math.Abs(float64(got[r]) - ref); !(e <= 1e-5*mag+1e-6) {
							t.Fatalf("row %d: got %v, want %v", r, got[r], ref)
						}
					}
				})
			}
		}
	}
}
