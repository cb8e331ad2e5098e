package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/shaders"
)

// withTier runs the rest of the test on the exact or the fast tier of the shared context,
// restoring the tier after. A device without the fast kernels' subgroup arithmetic has only
// the exact tier: asking it for the fast one skips, saying why.
func withTier(t testing.TB, c *Context, exact bool) {
	t.Helper()
	prev := c.exact
	c.SetExact(exact)
	t.Cleanup(func() { c.exact = prev })
	if c.exact != exact {
		t.Skipf("the fast tier needs subgroup arithmetic, which %s does not report", c.Info.Name)
	}
}

// tiers names both numeric tiers for table-driven tests.
var tiers = []struct {
	name  string
	exact bool
}{{"exact", true}, {"fast", false}}

// Split attention against a float64 reference on the same f16 cache, with unrounded queries:
// decode at the first position, inside the first 128-position chunk, across chunks and splits;
// prefill rows that straddle chunk boundaries; head groups of 1, 2 and 4 query heads per KV
// head and head sizes 64 and 128. Bound: every output within 2e-5 relative (max(1,|ref|)):
// f32 scores and sums over ≤ 1100 positions of unit-scale values carry errors ~1e-6. On
// cooperative-matrix devices the prefill cases run once more on attention_prefill_cm16 (Q and
// P rounded to fp16 once, VKLLM_GPU_ATT_FP16): bound 3e-3 (fp16's 2^-11 on each score term and
// weight, over unit-scale scores); it fails if they did not take that kernel.
func TestSplitAttentionMatchesFloat64Reference(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, false)
	defer func(fp16, cm2, flash bool, span, heads int) {
		c.attFP16, c.attCM2, c.attFlash, c.attCM2MinSpan, c.flashHeads = fp16, cm2, flash, span, heads
	}(c.attFP16, c.attCM2, c.attFlash, c.attCM2MinSpan, c.flashHeads)
	flashAble := c.attFlash
	c.attCM2MinSpan = 1 // every prefill case, short spans too
	// Five rounds: attention_split and the f32-level attention_prefill_cm; attention_flash
	// (where the device has subgroup shuffles), with its default head groups and with up to 8
	// heads a workgroup whatever their size (VKLLM_GPU_ATT_FLASH_HEADS=8: the wide variants);
	// the prefill kernels with fp16 queries and weights, attention_prefill_cm16 and (on NV
	// cooperative matrix 2) the one-pass attention_prefill_cm2.
	for _, round := range []struct {
		flash, fp16, cm2 bool
		heads            int
		made             string
	}{{false, false, false, 0, ""}, {true, false, false, 0, "attention_flash_h4_k2"}, {true, false, false, 8, "attention_flash_h8_k2"},
		{false, true, false, 0, "attention_prefill_cm16"}, {false, true, true, 0, "attention_prefill_cm2_d128"}} {
		if round.flash && !flashAble {
			t.Logf("%s: no subgroup shuffles (or VKLLM_GPU_ATT_FLASH=0), so no attention_flash to check", c.Info.Name)
			continue
		}
		if round.fp16 && c.gemm != gemmCoopmat {
			t.Logf("%s: no cooperative matrices, so no %s to check", c.Info.Name, round.made)
			continue
		}
		if round.cm2 && !c.cm2Able {
			t.Logf("%s: no NV cooperative matrix 2 (%s), so no attention_prefill_cm2 to check", c.Info.Name, c.cm2Reason)
			continue
		}
		c.attFP16, c.attCM2, c.attFlash, c.flashHeads = round.fp16, round.cm2, round.flash, round.heads
		if round.made != "" {
			forgetKernels(c, round.made) // made below, or the switch is not wired
		}
		testSplitAttention(t, c, round.fp16, round.flash)
		if _, made := c.kernels[round.made]; round.made != "" && !made {
			t.Fatalf("the prefill cases did not run %s", round.made)
		}
	}
}

func testSplitAttention(t *testing.T, c *Context, fp16, flash bool) {
	for _, tc := range []struct {
		headDim, nHead, nKV, pos0, m, ctx int
	}{
		{64, 4, 4, 0, 1, 256},       // one position, one head per group
		{64, 4, 2, 37, 1, 256},      // decode inside the first chunk
		{128, 8, 2, 1000, 1, 1100},  // decode over many chunks and splits, 4 heads per group
		{256, 8, 2, 500, 1, 512},    // 256-wide heads: four 16-byte words a lane
		{80, 6, 2, 300, 1, 512},     // 3 heads a group, 10 words a row: lanes past the row idle
		{128, 16, 2, 2000, 1, 2048}, // 8 heads a group
		{64, 8, 2, 130, 5, 512},     // prefill rows across a chunk boundary
		{128, 4, 1, 0, 19, 64},      // prefill from position 0, a 4-head group, a short context
		// On cooperative-matrix devices prefill takes attention_prefill_cm's 16-row tiles:
		{128, 32, 8, 300, 40, 512},   // an 8B model's layout: 4 tokens x 4 heads a tile, 10 tiles
		{64, 16, 2, 0, 33, 64},       // 2 tokens x 8 heads a tile, the last tile half empty
		{128, 4, 4, 5, 17, 64},       // 16 tokens x 1 head a tile: a 1-token tile
		{128, 32, 8, 700, 150, 1024}, // 38 tiles: several workgroups and 4 splits
		{128, 8, 2, 4096, 20, 4352},  // deep: attention_prefill_cm2's interior blocks, 16 splits
	} {
		hp := attentionHeadsPerGroup(tc.nHead, tc.nKV, tc.headDim)
		cm := c.usesPrefillCoopmatAttention(tc.m, tc.headDim, hp)
		if (fp16 && !cm) || (flash && cm) {
			continue // checked in the round of its kernel
		}
		if flash {
			hp = c.flashHeadsPerGroup(tc.nHead, tc.nKV, tc.headDim)
		}
		tol := 2e-5
		if fp16 {
			tol = 3e-3
		}
		name := fmt.Sprintf("hd%d/heads%d-%d/pos%d/rows%d/fp16=%v/flash=%v", tc.headDim, tc.nHead, tc.nKV, tc.pos0, tc.m, fp16, flash)
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(tc.pos0*7 + tc.m)))
			row := tc.nKV * tc.headDim
			n := tc.pos0 + tc.m
			kf, vf := f16Round(randVec(rng, n*row, 1)), f16Round(randVec(rng, n*row, 1))
			kc := make([]uint32, tc.ctx*row/2)
			vc := make([]uint32, tc.ctx*row/2)
			for i := 0; i < n*row; i += 2 {
				kc[i/2] = packF16Pair(kf[i], kf[i+1])
				vc[i/2] = packF16Pair(vf[i], vf[i+1])
			}
			for i := n * row / 2; i < len(kc); i++ { // positions past the last query: NaN, never read
				kc[i], vc[i] = 0x7e007e00, 0x7e007e00
			}
			q := randVec(rng, tc.m*tc.nHead*tc.headDim, 1)
			kb, vb := uploadU32(t, c, kc), uploadU32(t, c, vc)
			qb, pb := upload(t, c, q), uploadU32(t, c, []uint32{uint32(tc.pos0)})
			ob := upload(t, c, poisoned(tc.m*tc.nHead*tc.headDim))
			part := zeros(t, c, c.attentionPartialFloats(tc.m, tc.nHead, tc.nKV, tc.headDim, tc.ctx))
			scale := 1 / math.Sqrt(float64(tc.headDim))
			qd := tc.nHead * tc.headDim
			run(t, c, func(s *Seq) {
				s.span = tc.pos0 + tc.m
				s.AttentionSplit(qb.All(), kb.All(), vb.All(), ob.All(), pb.All(), part.All(), tc.headDim, tc.nHead, tc.nKV, tc.m, qd, qd, tc.ctx, float32(scale))
			})
			got := readF32(t, ob, tc.m*qd)
			want := attentionRef(q, kf, vf, tc.pos0, tc.headDim, tc.nHead, tc.nKV, tc.m, scale)
			worst := 0.0
			for i := range want {
				e := math.Abs(float64(got[i])-float64(want[i])) / math.Max(1, math.Abs(float64(want[i])))
				if !(e <= tol) { // NaN fails too
					t.Fatalf("output %d: got %v, want %v (rel tol %g)", i, got[i], want[i], tol)
				}
				worst = math.Max(worst, e)
			}
			kernel := "attention_split"
			if flash {
				kernel = flashAttentionKernel(hp, tc.headDim)
			}
			if cm {
				kernel = c.prefillAttentionKernel(tc.headDim, tc.pos0+tc.m)
			}
			t.Logf("%s: max rel err %.2g (splits %d)", kernel, worst, c.attentionSplits(tc.m, tc.nHead/hp, tc.ctx))
		})
	}
}

// poisoned is n NaNs: outputs a kernel forgets to write fail the comparison.
func poisoned(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

// packF16Pair packs two f16-exact floats as the cache stores them (low half first).
func packF16Pair(a, b float32) uint32 {
	return uint32(quant.F32ToF16(a)) | uint32(quant.F32ToF16(b))<<16
}

// The fast RMSNorm against float64, on rows longer and shorter than its 256 threads: within
// 1e-5 relative (one f32 sum of ≤ 5000 squares, an inverse square root and two products).
func TestFastRMSNormMatchesFloat64Reference(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, false)
	for _, n := range []int{100, 4096, 4100, 4098} { // 4098: the scalar path
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(n)))
			const m, eps = 3, 1e-6
			x, g := randVec(rng, n*m, 3), randVec(rng, n, 1)
			xb, gb, yb := upload(t, c, x), upload(t, c, g), upload(t, c, poisoned(n*m))
			run(t, c, func(s *Seq) { s.RMSNorm(xb.All(), gb.All(), yb.All(), n, m, n, eps) })
			got := readF32(t, yb, n*m)
			for tk := 0; tk < m; tk++ {
				var ss float64
				for i := 0; i < n; i++ {
					ss += float64(x[tk*n+i]) * float64(x[tk*n+i])
				}
				scale := 1 / math.Sqrt(ss/float64(n)+eps)
				for i := 0; i < n; i++ {
					want := float64(x[tk*n+i]) * scale * float64(g[i])
					if e := math.Abs(float64(got[tk*n+i]) - want); !(e <= 1e-5*math.Max(1, math.Abs(want))) {
						t.Fatalf("row %d element %d: got %v, want %v (rel tol 1e-5)", tk, i, got[tk*n+i], want)
					}
				}
			}
		})
	}
}

// Heads per attention workgroup: the largest divisor of the group with at most 8 heads and
// 1024 query floats.
func TestAttentionHeadsPerGroup(t *testing.T) {
	for _, tc := range []struct{ nHead, nKV, headDim, want int }{
		{32, 8, 128, 4}, {32, 32, 128, 1}, {28, 4, 128, 7}, {64, 4, 128, 8}, {64, 4, 256, 4}, {40, 8, 128, 5}, {12, 2, 64, 6},
	} {
		if got := attentionHeadsPerGroup(tc.nHead, tc.nKV, tc.headDim); got != tc.want {
			t.Errorf("attentionHeadsPerGroup(%d, %d, %d) = %d, want %d", tc.nHead, tc.nKV, tc.headDim, got, tc.want)
		}
	}
}

// The fast tier is wired into the resident driver: a fast-tier model on a device with the fast
// kernels decodes through split attention, the fast RMSNorm and the int8 decode products
// (quantize_x8, matvec_x8) where the device has int8 dot products, else (and with
// VKLLM_GPU_X8=0) the f32 decode product and, with int8 dot products, the fused one
// (matvec_dec); the exact tier through none of them. A decode step on the int8 products folds
// the attention merge into the output product's rounding (no attention_merge). Fails if the
// driver stops taking any of them.
func TestResidentRunsTheFastKernelsOnlyOnTheFastTier(t *testing.T) {
	c := ctxOrSkip(t)
	m := loadShared(t, "rand-llama-q8_0")
	product := "matvec_fast_q8_0"
	if c.matvecUnits == 2 {
		product = "matvec_fast2_q8_0" // two units a lane per pass (VKLLM_GPU_MATVEC_UNITS)
	}
	f32Products := []string{product}
	if c.fusedDecode {
		f32Products = append(f32Products, "matvec_dec_q8_0") // the decode step's fused products
	}
	x8Products := []string{"quantize_x8", "matvec_x8_q8_0"}
	attention := "attention_split" // the split attention kernel that serves, made only when it does
	if h := m.Hyper; c.attFlash {
		attention = flashAttentionKernel(c.flashHeadsPerGroup(h.Heads, h.HeadsKV, h.HeadDim), h.HeadDim)
	}
	prevX8 := c.x8
	defer func() { c.x8 = prevX8 }()
	prompt := []int{1, 450, 3290}
	for _, tc := range []struct {
		name       string
		exact, x8  bool
		prompt     []int
		takes, not []string
	}{
		{"fast", false, prevX8, prompt, []string{attention, "attention_merge", "rmsnorm_fast"}, nil},
		{"fast, int8 products", false, true, prompt, x8Products, f32Products},
		// one token at a time: the attention merge folds into the output product's rounding
		{"fast, int8 products, decode only", false, true, prompt[:1], append([]string{attention}, x8Products...), append([]string{"attention_merge"}, f32Products...)},
		{"fast, f32 products", false, false, prompt, f32Products, x8Products},
		{"exact", true, prevX8, prompt, nil, append(append([]string{"attention_split", "attention_flash_h4_k1", "attention_merge", "rmsnorm_fast"}, f32Products...), x8Products...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.x8 && !c.Info.Features[FeatureInt8Dot] {
				t.Skipf("%s: no int8 dot products, so no int8 decode products", c.Info.Name)
			}
			withTier(t, c, tc.exact)
			c.x8 = tc.x8
			forgetKernels(c, append(append([]string{}, tc.takes...), tc.not...)...)
			r, err := NewResident(c, m, ResidentOptions{Context: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.Eval(tc.prompt, 0, false); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Eval([]int{17}, len(tc.prompt), false); err != nil {
				t.Fatal(err)
			}
			for _, k := range tc.takes {
				if _, made := c.kernels[k]; !made {
					t.Errorf("%s: kernel %s not made", tc.name, k)
				}
			}
			for _, k := range tc.not {
				if _, made := c.kernels[k]; made {
					t.Errorf("%s: kernel %s made", tc.name, k)
				}
			}
		})
	}
}

func TestPrefillCoopmatAttentionTakesPrefillTilesOnCoopmatDevices(t *testing.T) {
	cm, shared := &Context{gemm: gemmCoopmat}, &Context{gemm: gemmShared}
	for _, tc := range []struct {
		name           string
		c              *Context
		m, headDim, hp int
		want           bool
	}{
		{"prefill, head 128, 4 heads a group", cm, 512, 128, 4, true},
		{"prefill, head 64, 8 heads a group", cm, 7, 64, 8, true},
		{"decode keeps the split kernel", cm, 1, 128, 4, false},
		{"no cooperative matrices", shared, 512, 128, 4, false},
		{"head 256 is past the tile's registers", cm, 512, 256, 4, false},
		{"head 72 is not whole fragments", cm, 512, 72, 4, false},
		{"3 heads a group do not tile 16 rows", cm, 512, 128, 3, false},
	} {
		if got := tc.c.usesPrefillCoopmatAttention(tc.m, tc.headDim, tc.hp); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The one-pass cm2 prefill attention serves where the device can run cm2, VKLLM_GPU_ATT_CM2
// asks for it, the heads are 64 or 128 wide and the window spans cm2AttentionMinSpan positions
// or more; the two-pass kernels everywhere else.
func TestPrefillCM2AttentionServesLongSpansOnCM2Devices(t *testing.T) {
	on := &Context{cm2Able: true, attCM2: true, attCM2MinSpan: cm2AttentionMinSpan}
	off := &Context{cm2Able: true, attCM2: false, attCM2MinSpan: cm2AttentionMinSpan}
	noCM2 := &Context{cm2Able: false, attCM2: true, attCM2MinSpan: cm2AttentionMinSpan}
	for _, tc := range []struct {
		name          string
		c             *Context
		headDim, span int
		want          string
	}{
		{"deep window, head 128", on, 128, 4608, "attention_prefill_cm2_d128"},
		{"at the floor, head 64", on, 64, cm2AttentionMinSpan, "attention_prefill_cm2_d64"},
		{"below the floor", on, 128, cm2AttentionMinSpan - 1, "attention_prefill_cm16"},
		{"span unknown", on, 128, 0, "attention_prefill_cm16"},
		{"head 256", on, 256, 4608, "attention_prefill_cm16"},
		{"switched off", off, 128, 4608, "attention_prefill_cm16"},
		{"no cm2 on the device", noCM2, 128, 4608, "attention_prefill_cm16"},
	} {
		tc.c.attFP16 = true
		if got := tc.c.prefillAttentionKernel(tc.headDim, tc.span); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// attention_flash cuts a context into ranges of at least c.flashMinRange positions, so a
// decode step early in a context fills only the ranges it needs and the merge reads only
// those: 38 positions fill one range, 130 fill three; a context longer than splits x 64 fills
// every range. Checked on the partials' sums (an empty range has S = 0).
func TestFlashAttentionFillsRangesOfAtLeastTheShortest(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, false)
	if !c.attFlash {
		t.Skipf("%s: no subgroup shuffles (or VKLLM_GPU_ATT_FLASH=0), so no attention_flash", c.Info.Name)
	}
	const headDim, nHead, nKV = 64, 8, 2
	for _, tc := range []struct{ pos0, ctx int }{{37, 1024}, {129, 1024}, {2000, 2048}} {
		t.Run(fmt.Sprintf("pos%d", tc.pos0), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(tc.pos0)))
			n := tc.pos0 + 1
			row := nKV * headDim
			kc, vc := make([]uint32, tc.ctx*row/2), make([]uint32, tc.ctx*row/2)
			for i := 0; i < n*row/2; i++ {
				kc[i] = packF16Pair(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
				vc[i] = packF16Pair(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
			}
			kb, vb := uploadU32(t, c, kc), uploadU32(t, c, vc)
			qb, pb := upload(t, c, randVec(rng, nHead*headDim, 1)), uploadU32(t, c, []uint32{uint32(tc.pos0)})
			part := zeros(t, c, c.attentionPartialFloats(1, nHead, nKV, headDim, tc.ctx))
			var splits int
			run(t, c, func(s *Seq) {
				splits = s.AttentionSplitRanges(qb.All(), kb.All(), vb.All(), pb.All(), part.All(), headDim, nHead, nKV, 1, nHead*headDim, tc.ctx, 0.125)
			})
			got := readF32(t, part, splits*nHead*(headDim+2))
			rangeLen := max((n+splits-1)/splits, c.flashMinRange)
			want := (n + rangeLen - 1) / rangeLen
			for h := range nHead {
				filled := 0
				for s := range splits {
					if got[(h*splits+s)*(headDim+2)+1] > 0 {
						filled++
					}
				}
				if filled != want {
					t.Fatalf("head %d: %d of %d ranges filled over %d positions, want %d (ranges of at least %d)", h, filled, splits, n, want, c.flashMinRange)
				}
			}
			t.Logf("%d positions: %d of %d ranges filled", n, want, splits)
		})
	}
}

// The attention_flash variant holds the workgroup's heads and a row's 16-byte words per lane,
// no more (two heads of more than 128 dimensions take the 2-head variant); more than four
// heads of more than 128 dimensions have none (attention_split serves), and every name given
// is an embedded kernel.
func TestFlashAttentionKernelNames(t *testing.T) {
	for _, tc := range []struct {
		hp, headDim int
		want        string
	}{
		{1, 64, "attention_flash_h4_k1"}, {4, 64, "attention_flash_h4_k1"}, {4, 128, "attention_flash_h4_k2"},
		{3, 80, "attention_flash_h4_k2"}, {4, 256, "attention_flash_h4_k4"}, {3, 192, "attention_flash_h4_k4"},
		{2, 192, "attention_flash_h2_k4"}, {1, 256, "attention_flash_h2_k4"},
		{8, 64, "attention_flash_h8_k1"}, {8, 128, "attention_flash_h8_k2"}, {5, 120, "attention_flash_h8_k2"},
		{5, 160, ""}, {6, 192, ""},
	} {
		got := flashAttentionKernel(tc.hp, tc.headDim)
		if got != tc.want {
			t.Errorf("%d heads of %d: %q, want %q", tc.hp, tc.headDim, got, tc.want)
			continue
		}
		if got == "" {
			continue
		}
		if _, err := shaders.SPIRV(got); err != nil {
			t.Errorf("%d heads of %d: %v", tc.hp, tc.headDim, err)
		}
	}
}

// The roster says which split attention kernel serves, and why when it is not attention_flash.
func TestRosterNamesTheAttentionKernel(t *testing.T) {
	for _, tc := range []struct {
		exact, flash, shuffle bool
		want                  string
	}{
		{false, true, true, "attention_flash"},
		{false, false, false, "without shuffles"},
		{true, false, true, "exact tier"},
	} {
		c := &Context{Info: DeviceInfo{Features: map[string]bool{FeatureSubgroupShuffle: tc.shuffle}}, exact: tc.exact, attFlash: tc.flash, flashMinRange: flashMinRange}
		if got := c.attentionSelects(); !strings.Contains(got, tc.want) {
			t.Errorf("exact %v, flash %v, shuffle %v: %q, want it to say %q", tc.exact, tc.flash, tc.shuffle, got, tc.want)
		}
	}
}

// attention_flash's default head groups keep a lane's accumulators within flashAccumulators:
// 8 heads of 64 dimensions, 4 of 128, 2 of 256 (the GQA group permitting), and
// VKLLM_GPU_ATT_FLASH_HEADS overrides the most.
func TestFlashHeadsPerGroupKeepTheAccumulatorsFew(t *testing.T) {
	c := &Context{}
	for _, tc := range []struct {
		nHead, nKV, headDim, heads, want int
	}{
		{32, 8, 64, 0, 4}, {32, 4, 64, 0, 8}, {32, 4, 128, 0, 4}, {32, 8, 128, 0, 4},
		{16, 2, 256, 0, 2}, {24, 8, 256, 0, 1}, {32, 4, 128, 8, 8}, {16, 2, 256, 4, 4},
	} {
		c.flashHeads = tc.heads
		if got := c.flashHeadsPerGroup(tc.nHead, tc.nKV, tc.headDim); got != tc.want {
			t.Errorf("%d heads over %d of %d (most %d): %d a workgroup, want %d", tc.nHead, tc.nKV, tc.headDim, tc.heads, got, tc.want)
		}
	}
}
