package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/synth"
	"github.com/vkllm/vkllm/engine/quant"
)

// The mixture-of-experts kernels against plain Go references on synthetic inputs.

// routeRef is the router's choice in float64: the gating's probabilities, the used largest
// (ties to the lower index), their weights renormalised and scaled.
func routeRef(logits []float64, used int, gating model.Gating, norm bool, scale float64) ([]int, []float64) {
	p := slices.Clone(logits)
	softmax := func(v []float64) {
		mx := slices.Max(v)
		var sum float64
		for i := range v {
			v[i] = math.Exp(v[i] - mx)
			sum += v[i]
		}
		for i := range v {
			v[i] /= sum
		}
	}
	switch gating {
	case model.GatingSoftmax:
		softmax(p)
	case model.GatingSigmoid:
		for i, v := range p {
			p[i] = 1 / (1 + math.Exp(-v))
		}
	}
	idx := make([]int, len(p))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case p[a] > p[b]:
			return -1
		case p[a] < p[b]:
			return 1
		}
		return 0
	})
	sel := idx[:used]
	w := make([]float64, used)
	for j, e := range sel {
		w[j] = p[e]
	}
	if gating == model.GatingSoftmaxSelected {
		softmax(w)
	}
	if norm {
		var sum float64
		for _, v := range w {
			sum += v
		}
		sum = math.Max(sum, 6.103515625e-5)
		for j := range w {
			w[j] /= sum
		}
	}
	for j := range w {
		w[j] *= scale
	}
	return sel, w
}

// The router on the device selects the same experts as the float64 reference, in the same
// order, and their weights agree within 1e-6 relative: over 8 to 512 experts, 1 to 10 used, every gating with and without renormalisation and a scale, a single token and a
// batch. Token 1 of each batch repeats some logits exactly, so equal probabilities must go to
// the lower index as engine/cpu's topK sends them. The logits are spread (σ = 2) so the
// reference's top-k has no near-ties the f32 arithmetic could reorder. Both routes, whatever
// the default: the workgroup's, a barrier a choice, and the one subgroup's where its lanes
// hold every expert four a lane (moe_route_1sg4, VKLLM_GPU_ROUTE_SUBGROUP; on lavapipe's 8
// lanes up to 32 experts, the larger cases take moe_route).
func TestMoERouteSelectsTheReferenceExpertsAndWeights(t *testing.T) {
	c := ctxOrSkip(t)
	defer func(on bool) { c.routeSubgroup = on }(c.routeSubgroup)
	for _, oneSubgroup := range []bool{false, true} {
		c.routeSubgroup = oneSubgroup
		testMoERouteAgainstReference(t, c)
	}
	// 8 experts fit four a lane on any subgroup: the four-slot variant chose them
	if _, made := c.kernels["moe_route_1sg4"]; !made {
		t.Errorf("moe_route_1sg4 was not made: the one-subgroup route of 8 experts took another variant")
	}
}

// testMoERouteAgainstReference runs each case on the variant routeKernel names for its experts
// (moe_route, or under VKLLM_GPU_ROUTE_SUBGROUP _1sg4 up to four experts a lane) and
// checks that variant was the one made.
func testMoERouteAgainstReference(t *testing.T, c *Context) {
	sg := c.Info.SubgroupSize
	for _, tc := range []struct {
		experts, used, m int
		gating           model.Gating
		norm             bool
		scale            float32
	}{
		{8, 2, 1, model.GatingSoftmax, false, 1},  // qwen2moe-like: no renormalisation
		{8, 2, 5, model.GatingSoftmax, true, 1},   // qwen3moe-like
		{60, 4, 5, model.GatingSoftmax, false, 1}, // Qwen1.5-MoE's 60 experts, 4 used
		{128, 8, 5, model.GatingSoftmax, true, 1}, // Qwen3-30B-A3B's 128, 8 used
		{128, 8, 1, model.GatingSigmoid, true, 2.5},
		{60, 1, 5, model.GatingSoftmaxSelected, false, 1},
		{60, 6, 5, model.GatingSoftmaxSelected, true, 1},
		{130, 8, 5, model.GatingSoftmax, true, 1},  // some threads hold three experts
		{256, 8, 5, model.GatingSoftmax, true, 1},  // Qwen3.5/3.6-MoE's 256
		{512, 10, 3, model.GatingSigmoid, true, 1}, // the most moe_route holds
		// the most the four-slot one-subgroup route holds, every lane full, and one past three a lane
		{4 * sg, min(8, sg), 5, model.GatingSoftmax, true, 1},
		{3*sg + 1, min(4, sg), 3, model.GatingSoftmaxSelected, true, 1},
	} {
		kernel := c.routeKernel("moe_route", tc.experts)
		name := fmt.Sprintf("%s/e%d/k%d/tokens%d/%v/norm%v/scale%g", kernel, tc.experts, tc.used, tc.m, tc.gating, tc.norm, tc.scale)
		t.Run(name, func(t *testing.T) {
			forgetKernels(c, kernel)
			defer func() {
				if _, made := c.kernels[kernel]; !made && !t.Failed() {
					t.Errorf("%s was not made", kernel)
				}
			}()
			rng := rand.New(rand.NewSource(int64(tc.experts*100 + tc.used*10 + tc.m)))
			logits := randVec(rng, tc.m*tc.experts, 2)
			if tc.m > 1 {
				row := logits[tc.experts : 2*tc.experts]
				best := slices.Index(row, slices.Max(row))
				for i := 0; i < tc.experts; i += 3 {
					row[i] = row[best] // a tie of the largest with many lower and higher indices
				}
			}
			lb, ib, wb := upload(t, c, logits), zeros(t, c, tc.m*tc.used), zeros(t, c, tc.m*tc.used)
			run(t, c, func(s *Seq) {
				s.MoERoute(lb.All(), ib.All(), wb.All(), tc.experts, tc.used, tc.m, tc.gating, tc.norm, tc.scale)
			})
			ids, err := ib.ReadU32(0, tc.m*tc.used)
			if err != nil {
				t.Fatal(err)
			}
			wts := readF32(t, wb, tc.m*tc.used)
			for tok := 0; tok < tc.m; tok++ {
				l := make([]float64, tc.experts)
				for i := range l {
					l[i] = float64(logits[tok*tc.experts+i])
				}
				sel, w := routeRef(l, tc.used, tc.gating, tc.norm, float64(tc.scale))
				for j := range sel {
					q := tok*tc.used + j
					if int(ids[q]) != sel[j] {
						t.Fatalf("token %d choice %d: expert %d, want %d (all: %v, want %v)", tok, j, ids[q], sel[j], ids[tok*tc.used:(tok+1)*tc.used], sel)
					}
					if e := math.Abs(float64(wts[q]) - w[j]); e > 1e-6*math.Abs(w[j]) {
						t.Fatalf("token %d choice %d (expert %d): weight %v, want %v", tok, j, sel[j], wts[q], w[j])
					}
				}
			}
		})
	}
}

// moeTestWeights returns ne experts of n rows of k random elements of type t, quantized, and
// their dequantized values.
func moeTestWeights(t *testing.T, rng *rand.Rand, typ quant.Type, k, n, ne int) ([]byte, []float32) {
	t.Helper()
	var wq []byte
	if slices.Contains(iquantTypes, typ) {
		wq = randomIQBlocks(rng, typ, k*n*ne/typ.BlockSize(), iqElementScale(typ))
	} else {
		var err error
		if wq, err = quant.Quantize(typ, randVec(rng, k*n*ne, 0.5)); err != nil {
			t.Fatal(err)
		}
	}
	return wq, dequantized(t, typ, wq, k*n*ne)
}

// The expert product against a float64 reference on engine/quant's dequantized weights, for
// every weight type the dense kernels read: the dequantization is exact (dq32), so the bound
// is the f32 summation's, |gpu − ref| <= 1e-5·Σ|w·x| + 1e-6 (the dense products' bound). Five
// experts of 7 rows (the last workgroup partial) serve 3 tokens × 2 slots, each pair's
// expert chosen so that experts repeat and one is never used. The tensor is bound as two
// bindings (experts 0-2 and 3-4), each dispatch skipping the other's pairs; the gate/up form
// (the token's input for both its pairs) and the down form (each pair its own input) are both
// checked, Y poisoned first so a row left unwritten shows.
func TestMoEMatVecMatchesDequantizedReferenceForEveryWeightType(t *testing.T) {
	c := ctxOrSkip(t)
	const n, ne, used, m = 7, 5, 2, 3
	ids := []uint32{4, 1, 1, 3, 0, 4} // expert 2 is never chosen
	pairs := m * used
	for _, typ := range supportedWeightOrder {
		k := 64
		if typ.BlockSize() > 32 {
			k = 512 // two superblocks: the second unit of a block at every offset
		}
		for _, perPair := range []bool{false, true} {
			form := "token-input"
			if perPair {
				form = "pair-input"
			}
			t.Run(fmt.Sprintf("%v/%s", typ, form), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(typ)*7 + int64(k)))
				wq, wd := moeTestWeights(t, rng, typ, k, n, ne)
				xRows := m
				if perPair {
					xRows = pairs
				}
				x := randVec(rng, xRows*k, 1)
				per := len(wq) / ne
				w0, w1 := uploadBytes(t, c, wq[:3*per]), uploadBytes(t, c, wq[3*per:])
				xb, ib := upload(t, c, x), uploadU32(t, c, ids)
				yb := upload(t, c, poisoned(pairs*n))
				run(t, c, func(s *Seq) {
					s.MoEMatVec(typ, w0.All(), xb.All(), yb.All(), ib.All(), k, n, 0, 3, used, pairs, perPair, k, n)
					s.MoEMatVec(typ, w1.All(), xb.All(), yb.All(), ib.All(), k, n, 3, 2, used, pairs, perPair, k, n)
				})
				got := readF32(t, yb, pairs*n)
				worst := 0.0
				for q := 0; q < pairs; q++ {
					e, xr := int(ids[q]), pairRow(q, used, perPair)
					for r := 0; r < n; r++ {
						ref, mag := expertRowRef(wd, x, e, r, xr, k, n, false)
						tol := 1e-5*mag + 1e-6
						if d := math.Abs(float64(got[q*n+r]) - ref); !(d <= tol) {
							t.Fatalf("pair %d (expert %d) row %d: got %v, want %v, tol %g", q, e, r, got[q*n+r], ref, tol)
						} else if mag > 0 {
							worst = math.Max(worst, d/mag)
						}
					}
				}
				t.Logf("max |err|/Σ|w·x| = %.2g", worst)
			})
		}
	}
}

// The paired decode product (gate, up and SwiGLU in one dispatch over one binding holding the
// gate experts and, 256-aligned after them, the up experts) equals the three dispatches apart
// (MoEMatVec twice, then SwiGLU) bit for bit, for every weight type: 5 experts of 7 rows, 2 of
// 3 tokens' pairs.
func TestMoEMatVecSwiGLUEqualsTheProductsApart(t *testing.T) {
	c := ctxOrSkip(t)
	const n, ne, used, m = 7, 5, 2, 3
	ids := []uint32{4, 1, 1, 3, 0, 4}
	pairs := m * used
	for _, typ := range supportedWeightOrder {
		k := 64
		if typ.BlockSize() > 32 {
			k = 512
		}
		t.Run(typ.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(typ)*5 + 1))
			gq, _ := moeTestWeights(t, rng, typ, k, n, ne)
			uq, _ := moeTestWeights(t, rng, typ, k, n, ne)
			off := (len(gq) + 255) / 256 * 256
			both := make([]byte, off+len(uq))
			copy(both, gq)
			copy(both[off:], uq)
			wb, gb, ub := uploadBytes(t, c, both), uploadBytes(t, c, gq), uploadBytes(t, c, uq)
			xb, ib := upload(t, c, randVec(rng, m*k, 1)), uploadU32(t, c, ids)
			yb, gy, uy := upload(t, c, poisoned(pairs*n)), zeros(t, c, pairs*n), zeros(t, c, pairs*n)
			run(t, c, func(s *Seq) {
				s.MoEMatVecSwiGLU(typ, wb.All(), xb.All(), yb.All(), ib.All(), uint64(off), k, n, 0, ne, used, pairs, k, n)
				s.MoEMatVec(typ, gb.All(), xb.All(), gy.All(), ib.All(), k, n, 0, ne, used, pairs, false, k, n)
				s.MoEMatVec(typ, ub.All(), xb.All(), uy.All(), ib.All(), k, n, 0, ne, used, pairs, false, k, n)
				s.Barrier()
				s.SwiGLU(gy.All(), uy.All(), gy.All(), pairs*n)
			})
			got, want := readF32(t, yb, pairs*n), readF32(t, gy, pairs*n)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("pair %d row %d: paired %v, apart %v", i/n, i%n, got[i], want[i])
				}
			}
		})
	}
}

// The grouped expert products (moe_group, then moe_gemm) against the same float64 reference
// and bound as the per-pair product, for a type of each block layout (the 32-element Q4_0,
// Q8_0, IQ4_NL and MXFP4 with its odd 17-byte blocks, the K-quants' superblocks, IQ4_XS and
// the grid types IQ2_XXS and IQ3_XXS): the expansion is dq32's, which the per-pair test
// checks for every type, and the IQ1/IQ2_S/IQ3_S kernels cost lavapipe most of a minute to
// compile on a fresh machine. 23 tokens × 3 slots = 69 pairs
// over 5 experts (expert 2 never chosen, expert 4 taking 30 pairs: two full tiles of 16 and
// partial ones), 7 rows (the last workgroup partial), the tensor bound as two bindings, both
// input forms, Y poisoned first. The grouping itself is checked too: the pairs expert by
// expert in order, the tiles covering them.
func TestMoEGEMMMatchesDequantizedReferenceForEveryWeightType(t *testing.T) {
	c := ctxOrSkip(t)
	// moe_gemm's own bound: on a cooperative-matrix device the products would take
	// moe_gemm_coopmat (TestMoEGEMMCoopmatWithinTheCoopmatBound).
	defer func(g gemmTier) { c.gemm = g }(c.gemm)
	c.gemm = gemmShared
	const n, ne, used, m = 7, 5, 3, 23
	pairs := m * used
	rng := rand.New(rand.NewSource(3))
	ids := make([]uint32, pairs)
	for q := range ids {
		switch {
		case q < 30:
			ids[q] = 4
		default:
			ids[q] = []uint32{0, 1, 3}[rng.Intn(3)]
		}
	}
	rng.Shuffle(pairs, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	ib := uploadU32(t, c, ids)
	tb := uploadU32(t, c, make([]uint32, 1+3*moeMaxTiles(pairs, ne)))
	sb := uploadU32(t, c, make([]uint32, pairs))
	run(t, c, func(s *Seq) { s.MoEGroup(ib.All(), tb.All(), sb.All(), pairs, ne) })
	sorted, err := sb.ReadU32(0, pairs)
	if err != nil {
		t.Fatal(err)
	}
	var want []uint32
	for e := uint32(0); e < ne; e++ {
		for q, id := range ids {
			if id == e {
				want = append(want, uint32(q))
			}
		}
	}
	if !slices.Equal(sorted, want) {
		t.Fatalf("grouped pairs %v, want %v", sorted, want)
	}
	tiles, err := tb.ReadU32(0, 1+3*moeMaxTiles(pairs, ne))
	if err != nil {
		t.Fatal(err)
	}
	covered := 0
	for i := 0; i < int(tiles[0]); i++ {
		e, first, cnt := tiles[1+3*i], int(tiles[2+3*i]), int(tiles[3+3*i])
		if first != covered || cnt < 1 || cnt > moeTilePairs {
			t.Fatalf("tile %d: (%d, %d, %d) after %d pairs covered", i, e, first, cnt, covered)
		}
		for _, q := range sorted[first : first+cnt] {
			if ids[q] != e {
				t.Fatalf("tile %d of expert %d holds pair %d of expert %d", i, e, q, ids[q])
			}
		}
		covered += cnt
	}
	if covered != pairs {
		t.Fatalf("the tiles cover %d of %d pairs", covered, pairs)
	}
	for _, typ := range []quant.Type{quant.F32, quant.Q4_0, quant.Q8_0, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL,
		quant.MXFP4, quant.IQ4_XS, quant.IQ2_XXS, quant.IQ3_XXS} {
		k := 64
		if typ.BlockSize() > 32 {
			k = 512
		}
		for _, perPair := range []bool{false, true} {
			form := "token-input"
			if perPair {
				form = "pair-input"
			}
			t.Run(fmt.Sprintf("%v/%s", typ, form), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(typ)*11 + int64(k)))
				got, wd, x := runMoEGEMM(t, c, rng, typ, k, n, ne, m, used, moeTilePairs, perPair, tb, sb)
				for q := 0; q < pairs; q++ {
					e, xr := int(ids[q]), pairRow(q, used, perPair)
					for r := 0; r < n; r++ {
						ref, mag := expertRowRef(wd, x, e, r, xr, k, n, false)
						if d := math.Abs(float64(got[q*n+r]) - ref); !(d <= 1e-5*mag+1e-6) {
							t.Fatalf("pair %d (expert %d) row %d: got %v, want %v, tol %g", q, e, r, got[q*n+r], ref, 1e-5*mag+1e-6)
						}
					}
				}
			})
		}
	}
}

// pairRow is the input row pair q multiplies: its own (perPair) or its token's, q/used.
func pairRow(q, used int, perPair bool) int {
	if perPair {
		return q
	}
	return q / used
}

// expertRowRef is row r of expert e (wd: the experts' n rows of k dequantized elements each)
// times input row xr of x, in float64: over the inputs as given or, with fp16, over the inputs
// rounded to fp16 as the cooperative-matrix kernels read them. mag is Σ|w·x| over the inputs as
// given, the scale of the tests' bounds.
func expertRowRef(wd, x []float32, e, r, xr, k, n int, fp16 bool) (ref, mag float64) {
	w, in := wd[(e*n+r)*k:(e*n+r+1)*k], x[xr*k:(xr+1)*k]
	for i := range w {
		p := float64(w[i]) * float64(in[i])
		if fp16 {
			ref += roundF16(w[i]) * roundF16(in[i])
		} else {
			ref += p
		}
		mag += math.Abs(p)
	}
	return ref, mag
}

// runMoEGEMM makes ne experts of n random rows of k elements of typ and m tokens' inputs (one a
// pair with perPair), binds the experts as two tensors (experts 0-2 and 3-4), records MoEGEMM
// over the grouping in tb and sb into a poisoned output and returns it with the dequantized
// weights and the inputs.
func runMoEGEMM(t *testing.T, c *Context, rng *rand.Rand, typ quant.Type, k, n, ne, m, used, tilePairs int, perPair bool, tb, sb *Buffer) (got, wd, x []float32) {
	t.Helper()
	return runExpertProducts(t, c, rng, typ, k, n, ne, m, used, perPair, func(s *Seq, w, x, y Binding, e0, nb int) {
		s.MoEGEMM(typ, w, x, y, tb.All(), sb.All(), k, n, e0, nb, used, m*used, ne, tilePairs, perPair, k, n)
	})
}

// runExpertProducts is runMoEGEMM with the products recorded by record, once for each of the
// two bindings (experts e0 to e0+nb-1), into y (pairs rows of n).
func runExpertProducts(t *testing.T, c *Context, rng *rand.Rand, typ quant.Type, k, n, ne, m, used int, perPair bool,
	record func(s *Seq, w, x, y Binding, e0, nb int)) (got, wd, x []float32) {
	t.Helper()
	pairs := m * used
	wq, wd := moeTestWeights(t, rng, typ, k, n, ne)
	xRows := m
	if perPair {
		xRows = pairs
	}
	x = randVec(rng, xRows*k, 1)
	per := len(wq) / ne
	w0, w1 := uploadBytes(t, c, wq[:3*per]), uploadBytes(t, c, wq[3*per:])
	xb, yb := upload(t, c, x), upload(t, c, poisoned(pairs*n))
	run(t, c, func(s *Seq) {
		record(s, w0.All(), xb.All(), yb.All(), 0, 3)
		record(s, w1.All(), xb.All(), yb.All(), 3, 2)
	})
	return readF32(t, yb, pairs*n), wd, x
}

// skewedExpertIDs routes pairs pairs (at least 70) over experts 0, 1, 3 and 4, shuffled: expert
// 4 takes 70 of them (whole 16-, 32- and 64-pair tiles and a partial one), expert 2 none.
func skewedExpertIDs(seed int64, pairs int) []uint32 {
	rng := rand.New(rand.NewSource(seed))
	ids := make([]uint32, pairs)
	for q := range ids {
		if q < 70 {
			ids[q] = 4
		} else {
			ids[q] = []uint32{0, 1, 3}[rng.Intn(3)]
		}
	}
	rng.Shuffle(pairs, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

// moe_gemm_ahead's data path on any device: its _plain kernels load, stage and expand the
// rows' chunks with the cooperative-matrix kernels' code and sum the same fp16 tiles in fp32,
// so they are held to the fp16 bound of TestMoEGEMMCoopmatWithinTheCoopmatBound (|gpu − ref16|
// ≤ 1e-4·Σ|w·x| + 1e-5 against the products of the fp16-rounded inputs). Rows of 608 elements
// (19 units: chunks of 256 elements, the last partial, a last step of one unit) or 768 for
// 256-element blocks (three chunks), 200 rows (three whole 64-row blocks and a partial one),
// blocks of 18, 17 and 210 bytes (rows starting at every offset modulo 4), 31 tokens × 3 slots
// over 5 experts in 64-pair tiles; both input forms. A kernel whose workgroup memory
// (moeAheadSharedBytes, which the validation layer checks against the module) exceeds the
// device's is skipped, saying so.
func TestMoEGEMMAheadChunksOnPlainKernels(t *testing.T) {
	c := ctxOrSkip(t)
	defer func(on bool) { c.moeTile64 = on }(c.moeTile64)
	c.moeTile64 = true // the grouping in 64-pair tiles
	const n, ne, used, m = 200, 5, 3, 31
	pairs := m * used
	ids := skewedExpertIDs(9, pairs)
	ib := uploadU32(t, c, ids)
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q4_K, quant.Q6_K, quant.IQ2_XXS, quant.MXFP4} {
		k := 608
		if typ.BlockSize() > 32 {
			k = 768
		}
		kernel := "moe_gemm_ahead_plain_p64_"
		if need := moeAheadSharedBytes(typ, false); need > c.Info.MaxComputeShared {
			t.Logf("%v %s: skipped, its %d bytes of workgroup memory exceed this device's %d", typ, kernel, need, c.Info.MaxComputeShared)
			continue
		}
		suf, _ := weightSuffix(typ)
		tb := uploadU32(t, c, make([]uint32, 1+3*moeMaxTiles(pairs, ne)))
		sb := uploadU32(t, c, make([]uint32, pairs))
		run(t, c, func(s *Seq) { s.MoEGroupTiles(ib.All(), tb.All(), sb.All(), pairs, ne, moeCoopmatTilePairs64) })
		bound := moeTileBound(pairs, ne, moeCoopmatTilePairs64)
		for _, perPair := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/%s/perPair=%v", typ, kernel, perPair), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(typ)*17 + moeCoopmatTilePairs64))
				per := uint32(0)
				if perPair {
					per = 1
				}
				got, wd, x := runExpertProducts(t, c, rng, typ, k, n, ne, m, used, perPair, func(s *Seq, w, x, y Binding, e0, nb int) {
					kern := s.kernel(kernel+suf, 5, 36)
					if kern == nil {
						return
					}
					s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(e0), uint32(nb), uint32(used), per, uint32(k), uint32(n), 1),
						uint32((n+moeAheadRows-1)/moeAheadRows), 1, uint32(bound), w, x, y, tb.All(), sb.All())
				})
				for q := 0; q < pairs; q++ {
					e, xr := int(ids[q]), pairRow(q, used, perPair)
					for r := 0; r < n; r++ {
						ref16, mag := expertRowRef(wd, x, e, r, xr, k, n, true)
						if g := float64(got[q*n+r]); !(math.Abs(g-ref16) <= 1e-4*mag+1e-5) {
							t.Fatalf("pair %d (expert %d) row %d: got %v, want %v (fp16 inputs), Σ|w·x| %g", q, e, r, g, ref16, mag)
						}
					}
				}
			})
		}
	}
}

// On the cooperative-matrix tier the grouped expert products run on moe_gemm_coopmat (fp16
// tiles, fp32 accumulation), held to the dense coopmat GEMM's two bounds: against the products
// of the fp16-rounded inputs |gpu − ref16| ≤ 1e-4·Σ|w·x| + 1e-5, against the exact products
// |gpu − ref| ≤ 2e-3·Σ|w·x| + 1e-5. 200 rows (a whole and a partial 128-row block), 31 tokens ×
// 3 slots over 5 experts with expert 4 taking 70 pairs (full 16-, 32- and 64-pair tiles and a
// partial one), grouped in tiles of 16 and 32 (the 32-pair kernels) and, under
// VKLLM_GPU_MOE_TILE64, of 16 (the 32-pair kernels), and 64: the _p64 kernels, and the 32-pair
// kernels a workgroup a half where rows are shorter than the context's moeTile64MinK (which
// the test sets to take each), both input forms, the tensor bound as two bindings; the test
// fails if the products do not take the kernel the case names. The same cases run under
// VKLLM_GPU_MOE_AHEAD, whose _p64 products take moe_gemm_ahead (64-row workgroups, so 200 rows
// are three whole blocks and a partial one), with rows of 608 elements (19 units: chunks of 256
// or 128 elements, the last one partial, and a last step with one unit) or, for 256-element
// blocks, 768 (three chunks: one loaded two chunks ahead).
func TestMoEGEMMCoopmatWithinTheCoopmatBound(t *testing.T) {
	c := ctxOrSkip(t)
	coopmatOrSkip(t, c)
	defer func(on, ahead bool, minK int) { c.moeTile64, c.moeAhead, c.moeTile64MinK = on, ahead, minK }(c.moeTile64, c.moeAhead, c.moeTile64MinK)
	const n, ne, used, m = 200, 5, 3, 31
	pairs := m * used
	ids := skewedExpertIDs(4, pairs)
	ib := uploadU32(t, c, ids)
	for _, ahead := range []bool{false, true} {
		for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q3_K, quant.IQ4_XS, quant.IQ2_XXS, quant.MXFP4, quant.F16} {
			k, p64 := 64, "moe_gemm_coopmat_p64_"
			if typ.BlockSize() > 32 {
				k = 512
			}
			if ahead {
				k, p64 = 608, "moe_gemm_ahead_p64_"
				if typ.BlockSize() > 32 {
					k = 768
				}
			}
			if !c.moeUsesCoopmat(typ, k) {
				continue // the exact tier keeps llama.cpp's order for Q4_0/Q8_0
			}
			suf, _ := weightSuffix(typ)
			for _, tc := range []struct {
				tilePairs int
				tile64    bool
				minK      int
				kernel    string
			}{
				{moeTilePairs, false, moeTile64MinK, "moe_gemm_coopmat_"},
				{moeCoopmatTilePairs, false, moeTile64MinK, "moe_gemm_coopmat_"},
				{moeTilePairs, true, 0, "moe_gemm_coopmat_"},
				{moeCoopmatTilePairs64, true, k + 1, "moe_gemm_coopmat_"}, // halves
				{moeCoopmatTilePairs64, true, k, p64},
			} {
				tilePairs := tc.tilePairs
				c.moeTile64, c.moeAhead, c.moeTile64MinK = tc.tile64, ahead, tc.minK
				tb := uploadU32(t, c, make([]uint32, 1+3*moeMaxTiles(pairs, ne)))
				sb := uploadU32(t, c, make([]uint32, pairs))
				run(t, c, func(s *Seq) { s.MoEGroupTiles(ib.All(), tb.All(), sb.All(), pairs, ne, tilePairs) })
				for _, perPair := range []bool{false, true} {
					t.Run(fmt.Sprintf("ahead=%v/%v/%stiles%d/minK%d/perPair=%v", ahead, typ, tc.kernel, tilePairs, tc.minK, perPair), func(t *testing.T) {
						rng := rand.New(rand.NewSource(int64(typ)*13 + int64(tilePairs)))
						_, p64Before := c.kernels[p64+suf]
						got, wd, x := runMoEGEMM(t, c, rng, typ, k, n, ne, m, used, tilePairs, perPair, tb, sb)
						if _, made := c.kernels[tc.kernel+suf]; !made {
							t.Fatalf("%v: the grouped products did not take %s%s", typ, tc.kernel, suf)
						}
						if _, made := c.kernels[p64+suf]; tc.kernel != p64 && made && !p64Before {
							t.Fatalf("%v: the grouped products took %s%s, not %s%s", typ, p64, suf, tc.kernel, suf)
						}
						for q := 0; q < pairs; q++ {
							e, xr := int(ids[q]), pairRow(q, used, perPair)
							for r := 0; r < n; r++ {
								ref, mag := expertRowRef(wd, x, e, r, xr, k, n, false)
								ref16, _ := expertRowRef(wd, x, e, r, xr, k, n, true)
								g := float64(got[q*n+r])
								if e16, ex := math.Abs(g-ref16), math.Abs(g-ref); !(e16 <= 1e-4*mag+1e-5 && ex <= 2e-3*mag+1e-5) {
									t.Fatalf("pair %d (expert %d) row %d: got %v, want %v (fp16 inputs %v), Σ|w·x| %g", q, e, r, g, ref, ref16, mag)
								}
							}
						}
					})
				}
			}
		}
	}
}

// The weighted sum into the residual equals engine/cpu's float32 arithmetic bit for bit, in
// its order (first product, then each further rounded product added, then the shared expert
// times its correctly rounded sigmoid gate, then the residual add): 3 tokens of 40 with 1, 2
// and 8 experts each, with and without a shared expert.
func TestMoECombineEqualsTheCPUSumBitForBit(t *testing.T) {
	c := ctxOrSkip(t)
	const dim, m = 40, 3
	for _, used := range []int{1, 2, 8} {
		for _, shared := range []bool{false, true} {
			t.Run(fmt.Sprintf("used%d/shared%v", used, shared), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(used)))
				x, o := randVec(rng, m*dim, 1), randVec(rng, m*used*dim, 1)
				w, sh, g := randVec(rng, m*used, 0.3), randVec(rng, m*dim, 1), randVec(rng, m, 2)
				xb, ob, wb, sb, gb := upload(t, c, x), upload(t, c, o), upload(t, c, w), upload(t, c, sh), upload(t, c, g)
				run(t, c, func(s *Seq) { s.MoECombine(xb.All(), ob.All(), wb.All(), sb.All(), gb.All(), dim, used, m, shared) })
				got := readF32(t, xb, m*dim)
				for tok := 0; tok < m; tok++ {
					sg := float32(1) / (1 + float32(math.Exp(float64(-g[tok]))))
					for d := 0; d < dim; d++ {
						q := tok * used
						acc := float32(o[q*dim+d] * w[q])
						for j := 1; j < used; j++ {
							acc += float32(o[(q+j)*dim+d] * w[q+j])
						}
						if shared {
							acc += float32(sh[tok*dim+d] * sg)
						}
						want := float32(x[tok*dim+d] + acc)
						if got[tok*dim+d] != want {
							t.Fatalf("token %d element %d: got %v, want %v", tok, d, got[tok*dim+d], want)
						}
					}
				}
			})
		}
	}
}

// The router's normed product (matvec_norm_f32) against float64: y = W·(x·g/sqrt(mean(x²)+eps)),
// every row within 1e-5·Σ|w·xn| + 1e-6, row counts that leave a workgroup's subgroups idle, and
// a row too wide for the kernel's shared copy of x (4096).
func TestMatVecNormF32MatchesFloat64Reference(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no subgroup arithmetic, so no matvec_norm_f32", c.Info.Name)
	}
	rng := rand.New(rand.NewSource(17))
	for _, sh := range []struct{ k, n int }{{256, 8}, {2048, 128}, {512, 13}, {4096, 5}} {
		t.Run(fmt.Sprintf("%dx%d", sh.n, sh.k), func(t *testing.T) {
			w, x, g := randVec(rng, sh.n*sh.k, 0.05), randVec(rng, sh.k, 3), randVec(rng, sh.k, 1)
			const eps = 1e-6
			ss := 0.0
			for _, v := range x {
				ss += float64(v) * float64(v)
			}
			scale := 1 / math.Sqrt(ss/float64(sh.k)+eps)
			wb, xb, gb, yb := upload(t, c, w), upload(t, c, x), upload(t, c, g), upload(t, c, poisoned(sh.n))
			run(t, c, func(s *Seq) { s.MatVecNormF32(wb.All(), xb.All(), gb.All(), yb.All(), sh.k, sh.n, eps) })
			got := readF32(t, yb, sh.n)
			for r := 0; r < sh.n; r++ {
				ref, mag := 0.0, 0.0
				for j := 0; j < sh.k; j++ {
					p := float64(w[r*sh.k+j]) * float64(x[j]) * scale * float64(g[j])
					ref += p
					mag += math.Abs(p)
				}
				if e := math.Abs(float64(got[r]) - ref); !(e <= 1e-5*mag+1e-6) {
					t.Fatalf("row %d: %v, float64 %v (bound %g)", r, got[r], ref, 1e-5*mag+1e-6)
				}
			}
		})
	}
}

// A qwen3moe decode step on the int8 expert products normalizes inside the router's product
// and the experts' rounding (VKLLM_GPU_ROUTER_NORM): one barrier fewer a layer, the same
// routing (logits within f32-level differences of the RMSNorm stage's). Fails if not wired.
func TestMoEDecodeRouterNormalizes(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no int8 expert products", c.Info.Name)
	}
	withTier(t, c, false)
	defer func(x8, on, route bool) { c.x8, c.routerNorm, c.routerRoute = x8, on, route }(c.x8, c.routerNorm, c.routerRoute)
	c.x8, c.routerRoute = true, false // the route's own fold: TestMoEDecodeRouterRoutes
	m := loadTiny(t, "", "qwen3moe", quant.Q4_K, 9)
	logits, barriers := decodeSwitched(t, c, m, "matvec_norm_f32", func(on bool) { c.routerNorm = on })
	if d := barriers[false] - barriers[true]; d != len(m.Layers) {
		t.Errorf("the decode step has %d barriers with the router normalizing, %d without: want %d fewer", barriers[true], barriers[false], len(m.Layers))
	}
	worst := maxAbsDiff(logits[false], logits[true])
	if !(worst <= 0.1) {
		t.Fatalf("logits differ by up to %g from the RMSNorm stage's", worst)
	}
	t.Logf("logits within %.2g of the RMSNorm stage's", worst)
}

// A decode step of the models with a shared expert or DeltaNet layers (qwen35moe, qwen2moe, the
// dense qwen35), on the int8 products, with each of five folds:
//   - VKLLM_GPU_CONV_FOLD: the DeltaNet's qkv product ends as ssm_conv does (delta_rule_fast
//     gates beta and alpha itself): one barrier fewer a DeltaNet layer;
//   - VKLLM_GPU_NORM_F32: the DeltaNet's f32 beta and alpha normalize x themselves beside the
//     rounding pass that normalizes too (no RMSNorm stage): one barrier fewer a DeltaNet layer;
//   - VKLLM_GPU_SHARED_X8: the shared expert takes its gate and up from a rounding made beside
//     the routed experts' (beside the route), its SwiGLU rounded for its down product beside
//     the routed experts' gate and up, its down product beside their SwiGLU's rounding: four
//     barriers fewer a layer (five with VKLLM_GPU_NORM_F32: the router and the shared expert's
//     gate normalize too);
//   - VKLLM_GPU_GATE_FOLDS: the gated attention's queries are read out of the query projection
//     in rope_kv_norm and its output gated in the output product's rounding: two barriers
//     fewer a gated attention layer;
//   - VKLLM_GPU_DELTA_ROUNDS: the delta rule rounds its output for the (Q8_0) output product
//     itself: one barrier fewer a DeltaNet layer.
//
// As in the ud-iq2_xxs mix, the second model's shared expert (Q8_0, 32-blocks) is rounded apart
// from its routed experts (Q6_K, Q8_K's 256-blocks; the tiny experts' down rows of 128 fall
// back to Q8_0). Each case's logits over four decode steps within 0.1 of all folds off
// (f32-level differences in the norms; an int8 rounding flipped by the last bit moves a tiny
// model's logits by a few hundredths; measured 0 on lavapipe) and its barrier count exactly
// that much lower: fails if any is not wired.
func TestHybridAndSharedExpertDecodeFolds(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no int8 products", c.Info.Name)
	}
	withTier(t, c, false)
	defer func(x8, normF32, sharedX8, convFold, gateFolds, deltaRounds bool) {
		c.x8, c.normF32, c.sharedX8, c.convFold, c.gateFolds, c.deltaRounds = x8, normF32, sharedX8, convFold, gateFolds, deltaRounds
	}(c.x8, c.normF32, c.sharedX8, c.convFold, c.gateFolds, c.deltaRounds)
	c.x8 = true
	apart := synth.Uniform(quant.Q8_0)
	apart.Name, apart.Experts = "q8_0-q6_k-experts", quant.Q6_K
	dir := t.TempDir()
	for _, tc := range []struct {
		arch string
		mix  synth.Mix
	}{{"qwen35moe", synth.Uniform(quant.Q8_0)}, {"qwen35moe", apart}, {"qwen2moe", synth.Uniform(quant.Q8_0)}, {"qwen35", synth.Uniform(quant.Q8_0)}} {
		t.Run(tc.arch+"-"+tc.mix.Name, func(t *testing.T) {
			m := loadTinyMix(t, dir, tc.arch, tc.mix, 7)
			deltaLayers, moeLayers, gatedLayers := 0, 0, 0
			for _, l := range m.Layers {
				if l.DeltaNet != nil {
					deltaLayers++
				} else if strings.HasPrefix(tc.arch, "qwen35") {
					gatedLayers++
				}
				if l.MoE != nil {
					moeLayers++
				}
			}
			type switches struct{ normF32, sharedX8, convFold, gateFolds, deltaRounds bool }
			fewer := map[switches]int{{normF32: true}: deltaLayers, {sharedX8: true}: 4 * moeLayers, {convFold: true}: deltaLayers,
				{gateFolds: true}: 3 * gatedLayers, {deltaRounds: true}: deltaLayers,
				{true, true, true, true, true}: 3*deltaLayers + 5*moeLayers + 3*gatedLayers}
			decode := func(sw switches) ([]float32, int) {
				c.normF32, c.sharedX8, c.convFold, c.gateFolds, c.deltaRounds = sw.normF32, sw.sharedX8, sw.convFold, sw.gateFolds, sw.deltaRounds
				return decodeSteps(t, c, m)
			}
			base, baseBarriers := decode(switches{})
			for sw, want := range fewer {
				logits, barriers := decode(sw)
				if got := baseBarriers - barriers; got != want {
					t.Errorf("%+v: %d barriers fewer a decode step than with all off (%d), want %d", sw, got, baseBarriers, want)
				}
				worst := maxAbsDiff(base, logits)
				t.Logf("%+v: %d barriers (%d with all off), logits within %.2g", sw, barriers, baseBarriers, worst)
				if !(worst <= 0.1) {
					t.Errorf("%+v: logits differ by up to %g from all switches off", sw, worst)
				}
			}
		})
	}
}
