package vulkan

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// The i-quant and MXFP4 kernels against engine/quant on random blocks: every byte random
// (grid indices, sign bits, integer scales, IQ4_XS's split scales, IQ1's deltas), only the
// block scale set to a finite value of a plausible size, so every codebook entry and every
// scale bit is exercised and a wrong one shows.

var iquantTypes = []quant.Type{quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4, quant.IQ2_XXS, quant.IQ3_XXS, quant.IQ3_S,
	quant.IQ2_XS, quant.IQ2_S, quant.IQ1_S, quant.IQ1_M}

// randomIQBlocks returns n random blocks of t whose block scale is about scale (a magnitude
// of a dequantized element of about scale times the type's typical integer).
func randomIQBlocks(rng *rand.Rand, t quant.Type, n int, scale float64) []byte {
	bb := t.BlockBytes()
	b := make([]byte, n*bb)
	rng.Read(b)
	for i := 0; i < n; i++ {
		blk := b[i*bb : (i+1)*bb]
		d := quant.F32ToF16(float32(scale * (0.5 + rng.Float64())))
		switch t {
		case quant.MXFP4:
			blk[0] = byte(int(math.Round(math.Log2(scale))) + 127 + rng.Intn(3) - 1) // E8M0: 2^(e-127) near scale
		case quant.IQ1_M: // the f16 scale lives in the top nibbles of the 4 scale words
			for j := 0; j < 4; j++ {
				w := binary.LittleEndian.Uint16(blk[48+2*j:])&0x0fff | (d>>(4*j)&0xf)<<12
				binary.LittleEndian.PutUint16(blk[48+2*j:], w)
			}
		default:
			binary.LittleEndian.PutUint16(blk, d)
		}
	}
	return b
}

// iqElementScale is the block scale that gives elements of unit size for random blocks of t.
func iqElementScale(t quant.Type) float64 {
	switch t {
	case quant.IQ4_NL:
		return 1.0 / 64
	case quant.IQ4_XS:
		return 1.0 / (64 * 16)
	case quant.MXFP4:
		return 1.0 / 4
	case quant.IQ3_S:
		return 1.0 / (16 * 8)
	}
	return 1.0 / (16 * 3) // the grid types: ls up to 31 times a unit-scaled magnitude of a few
}

func dequantized(t *testing.T, typ quant.Type, b []byte, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := quant.Dequantize(typ, b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The embedding kernels write dq32's values, so they must equal quant.Dequantize bit for bit:
// 256 rows of 1024 elements are 1024 superblocks (32768 grid indices: each of IQ1_S's 2048
// entries is drawn about 16 times, so the chance one goes unchecked is e^-16 per entry) or
// 8192 blocks of the 32-element types. Negative zeros compare equal.
func TestIQuantEmbedEqualsDequantizeBitForBit(t *testing.T) {
	c := ctxOrSkip(t)
	const k, rows = 1024, 256
	for _, typ := range iquantTypes {
		t.Run(typ.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(typ)))
			wq := randomIQBlocks(rng, typ, k*rows/typ.BlockSize(), iqElementScale(typ))
			want := dequantized(t, typ, wq, k*rows)
			ids := make([]uint32, rows)
			for i := range ids {
				ids[i] = uint32((i * 97) % rows) // every row once, out of order
			}
			wb, ib, xb := uploadBytes(t, c, wq), uploadU32(t, c, ids), zeros(t, c, k*rows)
			run(t, c, func(s *Seq) { s.Embed(typ, wb.All(), ib.All(), xb.All(), k, rows, 0, rows, k) })
			got := readF32(t, xb, k*rows)
			for tok, id := range ids {
				for i := 0; i < k; i++ {
					if g, w := got[tok*k+i], want[int(id)*k+i]; g != w {
						t.Fatalf("token %d (row %d) element %d (block %d): got %v, want %v", tok, id, i, (int(id)*k+i)/typ.BlockSize(), g, w)
					}
				}
			}
		})
	}
}

// The decode products (matvec_<t> on the exact tier, matvec_fast_<t> on the fast tier) and
// the shared-memory prefill GEMM (matmul_<t>) against a float64 reference on engine/quant's
// dequantized weights: the dequantization is exact, so the only difference allowed is f32
// summation order, |gpu − ref| <= 1e-5·Σ|w·x| + 1e-6. k = 1280 leaves the fast matvec's last
// pass partial; k = 96 starts MXFP4's odd rows at odd bytes; 37 rows leave the last workgroup
// partial; Y starts at 1 to check accumulate.
func TestIQuantMatMulWithinBoundOfDequantizedReference(t *testing.T) {
	c := ctxOrSkip(t)
	prev := c.gemm
	c.gemm = gemmShared // the cooperative-matrix tier has its own test and bound
	t.Cleanup(func() { c.gemm = prev })
	const n = 37
	for _, tier := range tiers {
		for _, typ := range iquantTypes {
			for _, tc := range []struct{ k, m int }{{512, 1}, {1280, 1}, {512, 11}, {96, 1}, {96, 11}} {
				if tc.k%typ.BlockSize() != 0 {
					continue // k = 96: rows of three 32-element blocks (odd byte offsets for MXFP4's 17-byte blocks)
				}
				t.Run(fmt.Sprintf("%s/%v/k%d/tokens%d", tier.name, typ, tc.k, tc.m), func(t *testing.T) {
					withTier(t, c, tier.exact)
					k, m := tc.k, tc.m
					if m == 1 && c.usesFastMatvec(typ, k, m) == tier.exact {
						t.Fatalf("%v decode on the %s tier: matvec_fast %v", typ, tier.name, !tier.exact)
					}
					rng := rand.New(rand.NewSource(int64(typ)*100 + int64(k+m)))
					wq := randomIQBlocks(rng, typ, k*n/typ.BlockSize(), iqElementScale(typ))
					checkProduct(t, c, typ, wq, k, n, m, k, n, func(e, e16, mag float64) bool { return e <= 1e-5*mag+1e-6 })
				})
			}
		}
	}
}

// The cooperative-matrix GEMM (matmul_coopmat_<t>) takes fp16 tiles: held, as the other types
// are (coopmat_test.go), to the products of fp16-rounded inputs up to fp32 summation order
// (1e-4·Σ|w·x| + 1e-5) and to the exact products up to fp16 input rounding (2e-3·Σ|w·x| +
// 1e-5). Strides wider than the rows check the addressing; 100 rows and 70 tokens leave tiles
// partial.
func TestIQuantCoopmatGEMMWithinBound(t *testing.T) {
	c := ctxOrSkip(t)
	coopmatOrSkip(t, c)
	const k, n, m = 512, 100, 70
	for _, typ := range iquantTypes {
		t.Run(typ.String(), func(t *testing.T) {
			if !c.usesCoopmat(typ, k, m) {
				t.Fatalf("%v with %d tokens does not take the cooperative-matrix tier", typ, m)
			}
			rng := rand.New(rand.NewSource(int64(typ) * 7))
			wq := randomIQBlocks(rng, typ, k*n/typ.BlockSize(), iqElementScale(typ))
			checkProduct(t, c, typ, wq, k, n, m, k+32, n+3, func(e, e16, mag float64) bool {
				return e16 <= 1e-4*mag+1e-5 && e <= 2e-3*mag+1e-5
			})
		})
	}
}

// checkProduct runs MatMul of the n×k weights wq of typ with m random tokens (strides xs,
// ys) plain and accumulating onto ones, and checks every output with ok(|err|, |err against
// fp16-rounded inputs|, Σ|w·x|); rows past n must stay untouched.
func checkProduct(t *testing.T, c *Context, typ quant.Type, wq []byte, k, n, m, xs, ys int, ok func(e, e16, mag float64) bool) {
	t.Helper()
	checkProductWith(t, c, typ, wq, k, n, m, xs, ys, ok, func(s *Seq, w, x, y Binding, acc bool) {
		s.MatMul(typ, w, x, y, k, n, m, xs, ys, acc)
	})
}

// checkProductWith is checkProduct with the product recorded by record (plain, then
// accumulating).
func checkProductWith(t *testing.T, c *Context, typ quant.Type, wq []byte, k, n, m, xs, ys int, ok func(e, e16, mag float64) bool,
	record func(s *Seq, w, x, y Binding, accumulate bool)) {
	t.Helper()
	wd := dequantized(t, typ, wq, k*n)
	rng := rand.New(rand.NewSource(int64(k*n + m)))
	x := randVec(rng, xs*m, 1)
	ones := make([]float32, ys*m)
	for i := range ones {
		ones[i] = 1
	}
	wb, xb := uploadBytes(t, c, wq), upload(t, c, x)
	yb, ya := upload(t, c, ones), upload(t, c, ones)
	run(t, c, func(s *Seq) {
		record(s, wb.All(), xb.All(), yb.All(), false)
		s.Barrier()
		record(s, wb.All(), xb.All(), ya.All(), true)
	})
	got, gotAcc := readF32(t, yb, ys*m), readF32(t, ya, ys*m)
	worst := 0.0
	for tok := 0; tok < m; tok++ {
		for r := 0; r < ys; r++ {
			o := tok*ys + r
			if r >= n {
				if got[o] != 1 || gotAcc[o] != 1 {
					t.Fatalf("token %d: element %d past the %d rows was written", tok, r, n)
				}
				continue
			}
			var ref, ref16, mag float64
			for i := 0; i < k; i++ {
				wv, xv := wd[r*k+i], x[tok*xs+i]
				ref += float64(wv) * float64(xv)
				ref16 += roundF16(wv) * roundF16(xv)
				mag += math.Abs(float64(wv) * float64(xv))
			}
			e, e16 := math.Abs(float64(got[o])-ref), math.Abs(float64(got[o])-ref16)
			ea, ea16 := math.Abs(float64(gotAcc[o])-(ref+1)), math.Abs(float64(gotAcc[o])-(ref16+1))
			if !ok(e, e16, mag) || !ok(ea, ea16, mag) {
				t.Fatalf("token %d row %d: got %v (accumulated from 1: %v), want %v (fp16 inputs %v; Σ|w·x| %v)", tok, r, got[o], gotAcc[o], ref, ref16, mag)
			}
			worst = math.Max(worst, e/mag)
		}
	}
	t.Logf("max |err|/Σ|w·x| = %.2g", worst)
}

// dequant_f16 (the staging of quantized weights for the cooperative-matrix 2 GEMM, with the
// i-quants' codebooks in shared memory) writes every element of every i-quant type as
// engine/quant.Dequantize's value rounded to fp16, bit for bit, rows from an offset on.
func TestDequantF16EqualsDequantizeInF16(t *testing.T) {
	c := ctxOrSkip(t)
	rng := rand.New(rand.NewSource(16))
	const k, rows, row0 = 512, 9, 2
	for _, typ := range iquantTypes {
		t.Run(typ.String(), func(t *testing.T) {
			blocks := (row0 + rows) * k / typ.BlockSize()
			wq := randomIQBlocks(rng, typ, blocks, iqElementScale(typ))
			want := dequantized(t, typ, wq, (row0+rows)*k)[row0*k:]
			wb, hb := uploadBytes(t, c, wq), uploadBytes(t, c, make([]byte, 2*rows*k))
			s, err := c.NewSeq()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Free()
			s.DequantF16(typ, wb.All(), hb.All(), k, rows, row0)
			if err := s.Run(); err != nil {
				t.Fatal(err)
			}
			got, err := hb.Read(0, uint64(2*rows*k))
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range want {
				if h := binary.LittleEndian.Uint16(got[2*i:]); h != quant.F32ToF16(v) {
					t.Fatalf("element %d (row %d): f16 %#04x (%g), want %#04x (%g)", i, row0+i/k, h, quant.F16ToF32(h), quant.F32ToF16(v), v)
				}
			}
		})
	}
}
