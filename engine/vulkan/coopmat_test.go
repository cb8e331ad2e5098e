package vulkan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/shaders"
)

func TestGEMMTierChoiceNeedsTheShapeTheShadersUse(t *testing.T) {
	good := CoopmatShape{M: 16, N: 16, K: 16, A: "f16", B: "f16", C: "f32", Result: "f32", Scope: "subgroup"}
	f16acc := good
	f16acc.C, f16acc.Result = "f16", "f16"
	int8 := CoopmatShape{M: 16, N: 16, K: 32, A: "s8", B: "s8", C: "s32", Result: "s32", Scope: "subgroup"}
	gpu := DeviceInfo{SubgroupSize: 32, Features: map[string]bool{FeatureCoopmatKHR: true, FeatureFP16: true}}
	wave64 := gpu
	wave64.SubgroupSize = 64
	noExt := DeviceInfo{SubgroupSize: 32, Features: map[string]bool{FeatureFP16: true}}
	all := coopmatFacts{shapes: []CoopmatShape{int8, f16acc, good}, compute: true, memModel: true}
	for _, tc := range []struct {
		name   string
		info   DeviceInfo
		facts  coopmatFacts
		want   gemmTier
		reason string
	}{
		{"extension and shape", gpu, all, gemmCoopmat, "16x16x16 f16*f16+f32->f32 subgroup"},
		{"no extension", noExt, all, gemmShared, "no VK_KHR_cooperative_matrix"},
		{"only other shapes", gpu, coopmatFacts{shapes: []CoopmatShape{int8, f16acc}, compute: true, memModel: true}, gemmShared, "among the 2 reported"},
		{"not in compute shaders", gpu, coopmatFacts{shapes: all.shapes, memModel: true}, gemmShared, "compute shaders"},
		{"no memory model", gpu, coopmatFacts{shapes: all.shapes, compute: true}, gemmShared, "vulkanMemoryModel"},
		{"subgroups of 64", wave64, all, gemmShared, "subgroup size 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := chooseGEMMTier(tc.info, tc.facts)
			if got != tc.want || !strings.Contains(reason, tc.reason) {
				t.Fatalf("got %v (%s), want %v (reason containing %q)", got, reason, tc.want, tc.reason)
			}
		})
	}
}

func TestCoopmatTierTakesOnlyMultiTokenProductsWithoutAnExactOrder(t *testing.T) {
	c := &Context{gemm: gemmCoopmat, exact: true}
	for _, tc := range []struct {
		typ  quant.Type
		k, m int
		want bool
	}{
		{quant.Q4_K, 4096, 512, true},
		{quant.Q4_1, 64, 2, true},
		{quant.Q4_0, 4096, 512, false}, // llama.cpp's exact order
		{quant.Q8_0, 4096, 512, false},
		{quant.F16, 4096, 7, true},
		{quant.Q4_K, 4096, 1, false}, // decode keeps the matvec
		{quant.F32, 4096, 512, false},
		{quant.F16, 100, 512, false}, // rows not whole 32-element units
	} {
		if got := c.usesCoopmat(tc.typ, tc.k, tc.m); got != tc.want {
			t.Errorf("%v k=%d m=%d: coopmat %v, want %v", tc.typ, tc.k, tc.m, got, tc.want)
		}
	}
	if !(&Context{gemm: gemmCoopmat}).usesCoopmat(quant.Q4_0, 4096, 512) {
		t.Error("the fast tier kept Q4_0 prefill off the cooperative-matrix tier")
	}
	if (&Context{gemm: gemmShared}).usesCoopmat(quant.Q4_K, 4096, 512) {
		t.Error("a shared-memory-tier context chose the cooperative-matrix tier")
	}
	if !strings.Contains(coopmatAbsentCost, "measured") || !strings.Contains(coopmatAbsentCost, "H200") {
		t.Errorf("the absent-tier warning carries no measured cost: %q", coopmatAbsentCost)
	}
}

func coopmatOrSkip(t testing.TB, c *Context) {
	t.Helper()
	if c.gemm == gemmShared {
		t.Skipf("device %q has no usable cooperative-matrix tier: %s", c.Info.Name, c.gemmReason)
	}
}

func roundF16(v float32) float64 { return float64(quant.F16ToF32(quant.F32ToF16(v))) }

// The cooperative-matrix GEMM takes fp16 weights and activations and accumulates in fp32, so
// it is held to two references: the products of the fp16-rounded inputs up to fp32 summation
// order (|gpu − ref16| ≤ 1e-4·Σ|w·x| + 1e-5; measured ≤ 2.3e-7 on the H200), and the exact
// products up to fp16 input rounding (|gpu − ref| ≤ 2e-3·Σ|w·x| + 1e-5; measured ≤ 8.6e-5).
// Rows and tokens that are not whole 128-wide tiles (nor 16-wide fragments) check the edges; strides wider than the
// rows check the addressing; the accumulate flag adds to Y.
//
// Where NV cooperative matrix 2 serves, its kernels (the cm2Types) are held to the same bounds,
// and the KHR kernels are checked for those types too with cm2 switched off; so is every other
// quantized type staged as fp16 for the cm2 F16 kernel.
func TestCoopmatGEMMMatchesReferenceForEveryWeightType(t *testing.T) {
	c := ctxOrSkip(t)
	coopmatOrSkip(t, c)
	kernelSets := []string{"khr"}
	if c.cm2Able {
		kernelSets = append(kernelSets, "cm2", "staged")
	} else {
		t.Logf("cooperative matrix 2 kernels not checked: %s", c.cm2Reason)
	}
	for _, set := range kernelSets {
		t.Run(set, func(t *testing.T) { checkCoopmatTypes(t, c, set) })
	}
}

// checkCoopmatTypes checks one kernel set: "khr" (MatMul on the KHR kernels), "cm2" (the cm2
// kernels of the cm2Types) or "staged" (every other quantized type staged as fp16 by
// DequantF16, then the cm2 F16 kernel, as Resident.stagedMatMul does).
func checkCoopmatTypes(t *testing.T, c *Context, set string) {
	types := weightTypes
	if set == "staged" {
		types = stagedTypes()
	}
	for _, typ := range types {
		if typ == quant.F32 || typ == quant.BF16 || (c.exact && llamaOrderTypes[typ]) {
			continue // not on this tier (BF16: not built yet, coopmat.go says why)
		}
		if set == "cm2" && !cm2Types[typ] {
			continue // the KHR kernel, checked in the other pass
		}
		// 100 rows: a partial 128-row tile whose last 16-row fragment is partial too; 300 rows
		// and 200 tokens: whole and partial tiles in both directions.
		for _, tc := range []struct{ k, n, m int }{{512, 100, 2}, {512, 100, 70}, {96, 100, 33}, {256, 300, 200}} {
			k, n, m := tc.k, tc.n, tc.m
			if k%blockElems(typ) != 0 {
				continue // 96 (three 32-element units: a K step half filled) only for 32-element blocks
			}
			t.Run(fmt.Sprintf("%v/k%d/rows%d/tokens%d", typ, k, n, m), func(t *testing.T) {
				if !c.usesCoopmat(typ, k, m) {
					t.Fatalf("%v with %d tokens does not take the cooperative-matrix tier", typ, m)
				}
				checkCoopmatGEMM(t, c, typ, k, n, m, set)
			})
		}
	}
}

func TestCM2ChoiceNeedsTheTierTheDeviceAndTheShape(t *testing.T) {
	fits := flexShape{M: 16, N: 16, K: 16, A: "f16", B: "f16", C: "f32", R: "f32", Scope: "workgroup", Invocations: 256}
	wide := fits
	wide.Invocations = 128
	coarse := fits
	coarse.K = 64 // does not divide the 32-deep step
	f16acc := fits
	f16acc.C, f16acc.R = "f16", "f16"
	for _, tc := range []struct {
		name    string
		gemm    gemmTier
		enabled bool
		flex    []flexShape
		want    bool
		reason  string
	}{
		{"able", gemmCoopmat, true, []flexShape{f16acc, fits}, true, "workgroup-scope 64x128x32"},
		{"shared-memory tier", gemmShared, true, []flexShape{fits}, false, "KHR cooperative-matrix tier does not serve"},
		{"not enabled", gemmCoopmat, false, []flexShape{fits}, false, "not enabled at device creation"},
		{"other workgroup size", gemmCoopmat, true, []flexShape{wide}, false, "among the 1 flexible-dimension"},
		{"coarser K", gemmCoopmat, true, []flexShape{coarse, f16acc}, false, "among the 2 flexible-dimension"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := chooseCM2(tc.gemm, tc.enabled, tc.flex)
			if got != tc.want || !strings.Contains(reason, tc.reason) {
				t.Fatalf("got %v (%s), want %v (reason containing %q)", got, reason, tc.want, tc.reason)
			}
		})
	}
}

// A device that reports NV cooperative matrix 2 on the KHR tier must be able to run the cm2
// kernels, F16 prefill must take them and the resident driver must run them: this fails if the
// device creation, the shape query, the choice or Resident.project drops them.
func TestCM2IsAbleWhereTheDeviceReportsIt(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureCoopmat2NV] || c.gemm != gemmCoopmat {
		t.Skipf("device %q: no NV cooperative matrix 2 on the KHR tier (cm2 feature %v, GEMM tier %v)", c.Info.Name, c.Info.Features[FeatureCoopmat2NV], c.gemm)
	}
	if !c.cm2Able {
		t.Fatalf("device %q reports NV cooperative matrix 2, but the cm2 kernels cannot run: %s", c.Info.Name, c.cm2Reason)
	}
	if !c.usesCM2(quant.F16, 4096, 512) {
		t.Fatalf("F16 prefill does not take the cm2 kernels: %s", c.cm2Reason)
	}
	if got := c.usesCM2(quant.Q4_K, 4096, 512); got != config.GPUCM2.Bool() {
		t.Fatalf("Q4_K prefill takes the cm2 kernels: %v with VKLLM_GPU_CM2=%v", got, config.GPUCM2.Bool())
	}
	// Wired into the resident driver: an F16 model's prefill packs its inputs (the down
	// product's with the SwiGLU folded in) and runs cm2.
	// Its products take the F16 tile the context chose where their rows are whole K steps of
	// it, matmul_cm2_f16 otherwise.
	f16 := loadShared(t, "rand-llama-f16")
	f16Kernel := c.cm2F16.kernel
	if f16.Hyper.Dim%c.cm2F16.bk != 0 || f16.Hyper.FFN%c.cm2F16.bk != 0 {
		f16Kernel = "matmul_cm2_f16"
	}
	forgetKernels(c, "pack_f16", "pack_f16_swiglu", f16Kernel)
	r, err := NewResident(c, f16, ResidentOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Eval([]int{1, 450, 3290}, 0, false); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"pack_f16", "pack_f16_swiglu", f16Kernel} { // the down product's packing does the SwiGLU
		if _, made := c.kernels[k]; !made {
			t.Errorf("an F16 model's prefill did not make %s", k)
		}
	}
	// With VKLLM_GPU_CM2_STAGE a Q4_0 model's prefill stages its weights as fp16 for the F16
	// kernel; its logits equal those of the cm2 Q4_0 kernel (VKLLM_GPU_CM2: the same fp16
	// weights and activations) up to fp32 summation order.
	prompt := []int{1, 450, 3290, 310, 278, 3186, 338, 263, 1243, 2889, 13, 1576, 3996, 1354, 1701, 2916, 432} // the vocabulary is cut to 4096
	eval := func(stage bool, kernel string) []float32 {
		prevAll, prevStage := c.cm2All, c.cm2Stage
		c.cm2All, c.cm2Stage = !stage, stage
		defer func() { c.cm2All, c.cm2Stage = prevAll, prevStage }()
		forgetKernels(c, kernel)
		r, err := NewResident(c, loadShared(t, "rand-llama-q4_0"), ResidentOptions{Context: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if got := r.stage != nil; got != stage {
			t.Fatalf("staging buffer allocated %v with staging %v", got, stage)
		}
		logits, err := r.Eval(prompt, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		if planned := len(r.stagePlans[len(prompt)]); stage && c.stageAhead && planned < 2 {
			t.Fatalf("staging ahead planned %d stagings for the %d-token window (wanted several)", planned, len(prompt))
		}
		if _, made := c.kernels[kernel]; !made {
			t.Fatalf("a Q4_0 model's prefill (staging %v) did not make %s", stage, kernel)
		}
		return logits
	}
	direct, staged := eval(false, "matmul_cm2_q4_0"), eval(true, "dequant_f16_q4_0")
	// Prefill attention takes the one-pass cm2 kernel over spans of cm2AttentionMinSpan
	// positions and more (VKLLM_GPU_ATT_CM2), the two-pass KHR kernel over shorter ones.
	if hd := loadShared(t, "rand-llama-q4_0").Hyper.HeadDim; c.attCM2 && (hd == 64 || hd == 128) {
		name := fmt.Sprintf("attention_prefill_cm2_d%d", hd)
		forgetKernels(c, name)
		r, err := NewResident(c, loadShared(t, "rand-llama-q4_0"), ResidentOptions{Context: 2 * cm2AttentionMinSpan})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := r.Eval(prompt, 0, false); err != nil {
			t.Fatal(err)
		}
		if _, made := c.kernels[name]; made {
			t.Fatalf("a %d-token prompt made %s", len(prompt), name)
		}
		long := make([]int, cm2AttentionMinSpan)
		for i := range long {
			long[i] = prompt[i%len(prompt)]
		}
		if _, err := r.Eval(long, 0, false); err != nil {
			t.Fatal(err)
		}
		if _, made := c.kernels[name]; !made {
			t.Fatalf("a %d-token prompt did not make %s", len(long), name)
		}
	} else {
		t.Logf("no cm2 prefill attention to check here (VKLLM_GPU_ATT_CM2 %v, head size %d)", c.attCM2, hd)
	}
	// Staging ahead (each product beside the next staging) changes the order of the work, not
	// the arithmetic: the same logits bit for bit as every staging in its own stage.
	defer func(prev bool) { c.stageAhead = prev }(c.stageAhead)
	c.stageAhead = false
	inPlace := eval(true, "dequant_f16_q4_0")
	for i := range inPlace {
		if inPlace[i] != staged[i] {
			t.Fatalf("logit %d: %v staging ahead, %v with each staging in its own stage", i, staged[i], inPlace[i])
		}
	}
	maxd, mag := 0.0, 0.0
	for i := range direct {
		maxd = math.Max(maxd, math.Abs(float64(staged[i]-direct[i])))
		mag = math.Max(mag, math.Abs(float64(direct[i])))
	}
	t.Logf("staged against direct cm2 prefill: max |Δ logit| %.3g of max |logit| %.3g", maxd, mag)
	if maxd > 1e-3*mag+1e-4 {
		t.Fatalf("staged prefill logits differ from the cm2 Q4_0 kernel's by %.3g (max |logit| %.3g)", maxd, mag)
	}
}

func checkCoopmatGEMM(t *testing.T, c *Context, typ quant.Type, k, n, m int, set string) {
	rng := rand.New(rand.NewSource(int64(typ)*1000 + int64(m)))
	var wq []byte
	if _, iq := iquantSuffix[typ]; iq {
		wq = randomIQBlocks(rng, typ, k*n/typ.BlockSize(), iqElementScale(typ)/2)
	} else {
		var err error
		if wq, err = quant.Quantize(typ, randVec(rng, k*n, 0.5)); err != nil {
			t.Fatal(err)
		}
	}
	ok := func(e, e16, mag float64) bool { return e16 <= 1e-4*mag+1e-5 && e <= 2e-3*mag+1e-5 }
	if set == "khr" { // MatMul: the KHR kernels
		checkProduct(t, c, typ, wq, k, n, m, k+32, n+3, ok)
		return
	}
	// The cm2 kernels: the activations packed to fp16 first, as Resident.project does.
	xh := uploadBytes(t, c, make([]byte, 2*m*k))
	stage := uploadBytes(t, c, make([]byte, 2*n*k))
	checkProductWith(t, c, typ, wq, k, n, m, k+32, n+3, ok, func(s *Seq, w, x, y Binding, acc bool) {
		s.PackF16(x, xh.All(), k, m, k+32)
		if set == "staged" {
			s.DequantF16(typ, w, stage.All(), k, n, 0)
			s.Barrier()
			s.MatMulF16X(quant.F16, stage.All(), xh.All(), y, k, n, m, n+3, acc)
			return
		}
		s.Barrier()
		s.MatMulF16X(typ, w, xh.All(), y, k, n, m, n+3, acc)
	})
}

// randomQ4K makes rows×k/256 valid Q4_K blocks (finite scales) from random bytes.
func randomQ4K(rng *rand.Rand, blocks int) []byte {
	b := make([]byte, blocks*144)
	rng.Read(b)
	for i := 0; i < blocks; i++ {
		binary.LittleEndian.PutUint16(b[i*144:], quant.F32ToF16(0.002))
		binary.LittleEndian.PutUint16(b[i*144+2:], quant.F32ToF16(0.001))
	}
	return b
}

// BenchmarkPrefillGEMMTiers times one 4096x4096 Q4_K weight times 512 tokens on both tiers
// (GPU time from timestamps, 8 GEMMs per submit) and reports the speedup that
// coopmatAbsentCost quotes. Run: -test.run '^$' -test.bench PrefillGEMMTiers -test.benchtime 3x.
func BenchmarkPrefillGEMMTiers(b *testing.B) {
	c := ctxOrSkip(b)
	if c.gemm == gemmShared {
		b.Skipf("device has no usable cooperative-matrix tier: %s", c.gemmReason)
	}
	const k, n, m, reps = 4096, 4096, 512, 8
	rng := rand.New(rand.NewSource(1))
	wb := benchBuffer(b, c, randomQ4K(rng, n*k/256))
	xb := benchBuffer(b, c, f32Bytes(randVec(rng, k*m, 1)))
	yb := benchBuffer(b, c, make([]byte, 4*n*m))
	xhb := benchBuffer(b, c, make([]byte, 2*k*m))
	ms := map[string]float64{}
	type arm struct {
		name string
		tier gemmTier
		cm2  bool
	}
	arms := []arm{{"shared-memory", gemmShared, false}, {"cooperative-matrix (KHR)", gemmCoopmat, false}}
	if c.cm2Able {
		arms = append(arms, arm{"cooperative matrix 2", gemmCoopmat, true})
	}
	for _, a := range arms {
		prevTier := c.gemm
		c.gemm = a.tier // read while recording
		best := bestNsPerRep(b, c, reps, func(s *Seq) {
			if a.cm2 { // the fp16 packing included, as a prefill window pays it
				s.PackF16(xb.All(), xhb.All(), k, m, k)
				s.Barrier()
				s.MatMulF16X(quant.Q4_K, wb.All(), xhb.All(), yb.All(), k, n, m, n, false)
				return
			}
			s.MatMul(quant.Q4_K, wb.All(), xb.All(), yb.All(), k, n, m, k, n, false)
		}) / 1e6
		c.gemm = prevTier
		ms[a.name] = best
		fmt.Printf("BenchmarkPrefillGEMMTiers: %s: %.3f ms per 4096x4096 Q4_K x 512 GEMM (%.1f TFLOP/s)\n", a.name, best, 2*k*n*m/best/1e9)
	}
	b.ReportMetric(ms["shared-memory"], "shared-ms")
	b.ReportMetric(ms["cooperative-matrix (KHR)"], "coopmat-ms")
	b.ReportMetric(ms["shared-memory"]/ms["cooperative-matrix (KHR)"], "speedup")
	if c.cm2Able {
		b.ReportMetric(ms["cooperative matrix 2"], "cm2-ms")
	}
}

// BenchmarkCM2Tiles times the cooperative matrix 2 kernels and their candidates (the
// matmul_cm2x_* shaders: the F16 kernel at other tile shapes) against the KHR kernel on the
// GEMMs of an 8B prefill window (512 tokens: 4096x4096, 14336x4096, 4096x14336): quantized
// weights decoded in the cm2 load, and staged as fp16 first (DequantF16, timed with the
// product), and checks each candidate's output against the first kernel of its weight type
// (max |Δ| printed). Run: -test.run '^$' -test.bench CM2Tiles -test.benchtime 1x.
func BenchmarkCM2Tiles(b *testing.B) {
	c := ctxOrSkip(b)
	if !c.cm2Able {
		b.Skipf("device %q: cooperative matrix 2 cannot run: %s", c.Info.Name, c.cm2Reason)
	}
	const m, reps = 512, 8
	type cand struct {
		name   string
		typ    quant.Type
		xh     bool
		bm, bn int
		stage  bool // the weights staged as fp16 first (DequantF16), then this F16 kernel
	}
	cands := []cand{
		{"matmul_coopmat_q4_k", quant.Q4_K, false, 128, 128, false},
		{"matmul_cm2_q4_k", quant.Q4_K, true, cm2BM, cm2BN, false},
		{"matmul_cm2_f16", quant.Q4_K, true, cm2BM, cm2BN, true},
		{"matmul_cm2x_f16_64x128x64", quant.Q4_K, true, 64, 128, true},
		{"matmul_cm2x_f16_128x128x64f", quant.Q4_K, true, 128, 128, true},
		{"matmul_coopmat_q4_0", quant.Q4_0, false, 128, 128, false},
		{"matmul_cm2_q4_0", quant.Q4_0, true, cm2BM, cm2BN, false},
		{"matmul_cm2_f16", quant.Q4_0, true, cm2BM, cm2BN, true},
		{"matmul_coopmat_f16", quant.F16, false, 128, 128, false},
		{"matmul_cm2_f16", quant.F16, true, cm2BM, cm2BN, false},
	}
	for _, t := range cm2TileCandidates {
		if t.kernel != "matmul_cm2_f16" {
			cands = append(cands, cand{t.kernel, quant.F16, true, t.bm, t.bn, false})
		}
	}
	rng := rand.New(rand.NewSource(2))
	for _, g := range [][2]int{{4096, 4096}, {14336, 4096}, {4096, 14336}} {
		n, k := g[0], g[1]
		xv := randVec(rng, k*m, 1)
		xh := make([]byte, 2*len(xv))
		for i, v := range xv {
			binary.LittleEndian.PutUint16(xh[2*i:], quant.F32ToF16(v))
		}
		xb, xhb := benchBuffer(b, c, f32Bytes(xv)), benchBuffer(b, c, xh)
		yb := benchBuffer(b, c, make([]byte, 4*n*m))
		stage := benchBuffer(b, c, make([]byte, 2*n*k))
		weights := map[quant.Type]*Buffer{}
		want := map[quant.Type][]float32{}
		for _, typ := range []quant.Type{quant.Q4_K, quant.Q4_0, quant.F16} {
			wq, err := quant.Quantize(typ, randVec(rng, k*n, 0.05))
			if err != nil {
				b.Fatal(err)
			}
			weights[typ] = benchBuffer(b, c, wq)
		}
		// The first once more as a warm-up (the H200's clocks ramp), then every candidate twice,
		// in two rounds, so that a slow spell of a shared machine shows as disagreeing rounds.
		for idx, cd := range append(append([]cand{cands[0]}, cands...), cands...) {
			x := xb
			if cd.xh {
				x = xhb
			}
			run := func(s *Seq) {
				kern := s.kernel(cd.name, 3, 24)
				if kern == nil {
					return
				}
				w := weights[cd.typ].All()
				if cd.stage {
					s.DequantF16(cd.typ, w, stage.All(), k, n, 0)
					s.Barrier()
					w = stage.All()
				}
				s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(m), uint32(k), uint32(n), 0),
					uint32((n+cd.bm-1)/cd.bm), uint32((m+cd.bn-1)/cd.bn), 1, w, x.All(), yb.All())
			}
			best := bestNsPerRep(b, c, reps, run) / 1e6
			if idx == 0 {
				continue
			}
			got := readF32B(b, yb, n*m)
			maxd, mag := 0.0, 0.0
			if want[cd.typ] == nil {
				want[cd.typ] = got
			} else {
				for i := range got {
					maxd = math.Max(maxd, math.Abs(float64(got[i]-want[cd.typ][i])))
					mag = math.Max(mag, math.Abs(float64(want[cd.typ][i])))
				}
			}
			name := cd.name
			if cd.stage {
				name = fmt.Sprintf("%v staged + %s", cd.typ, cd.name)
			}
			fmt.Printf("BenchmarkCM2Tiles: %dx%d x %d tokens %s: %.3f ms (%.1f TFLOP/s), max |Δ| %.3g of max |y| %.3g\n",
				n, k, m, name, best, 2*float64(k)*float64(n)*m/best/1e9, maxd, mag)
		}
	}
}

// TestCM2TileSwitchNamesEmbeddedKernels checks that VKLLM_GPU_CM2_TILE's every candidate is an
// embedded kernel whose name states its tile, that the candidates differ, and that an empty or
// unknown value keeps the default.
func TestCM2TileSwitchNamesEmbeddedKernels(t *testing.T) {
	seen := map[string]bool{}
	for v, tile := range cm2TileCandidates {
		if got := chooseCM2Tile(v); got != tile || seen[tile.kernel] {
			t.Fatalf("%q: chose %+v, the candidate is %+v (or another's kernel)", v, got, tile)
		}
		seen[tile.kernel] = true
		if tile.bm%16 != 0 || tile.bn%16 != 0 || tile.bk%16 != 0 || !strings.HasPrefix(v, fmt.Sprintf("%dx%dx%d", tile.bm, tile.bn, tile.bk)) {
			t.Errorf("%q: tile %+v", v, tile)
		}
		if tile.kernel != "matmul_cm2_f16" && tile.kernel != "matmul_cm2x_f16_"+v {
			t.Errorf("%q: kernel %q does not name the tile", v, tile.kernel)
		}
		if _, err := shaders.SPIRV(tile.kernel); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	for _, v := range []string{"", " ", "32x32x32", "64x128x64_in"} {
		if got := chooseCM2Tile(v); got != cm2DefaultTile {
			t.Errorf("%q: %+v, want the default", v, got)
		}
	}
}

// TestPackF16SwiGLUEqualsSwiGLUThenPack checks that pack_f16_swiglu writes, bit for bit, what
// swiglu then pack_f16 write: the fold changes no number of the down product's input (inputs
// spanning the exponential's range, an odd row count, a tail past the last full workgroup).
func TestPackF16SwiGLUEqualsSwiGLUThenPack(t *testing.T) {
	c := ctxOrSkip(t)
	const k, m = 130, 5
	rng := rand.New(rand.NewSource(5))
	g, u := randVec(rng, m*k, 12), randVec(rng, m*k, 3)
	gb, ub := upload(t, c, g), upload(t, c, u)
	hb := upload(t, c, make([]float32, m*k))
	folded, twoPass := uploadBytes(t, c, make([]byte, 2*m*k)), uploadBytes(t, c, make([]byte, 2*m*k))
	run(t, c, func(s *Seq) {
		s.PackF16SwiGLU(gb.All(), ub.All(), folded.All(), k, m)
		s.SwiGLU(gb.All(), ub.All(), hb.All(), m*k)
		s.Barrier()
		s.PackF16(hb.All(), twoPass.All(), k, m, k)
	})
	a, errA := folded.Read(0, 2*m*k)
	b, errB := twoPass.Read(0, 2*m*k)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if !bytes.Equal(a, b) {
		for i := 0; i < m*k; i++ {
			if a[2*i] != b[2*i] || a[2*i+1] != b[2*i+1] {
				t.Fatalf("element %d (g %v, u %v): folded %#04x, two passes %#04x", i, g[i], u[i],
					binary.LittleEndian.Uint16(a[2*i:]), binary.LittleEndian.Uint16(b[2*i:]))
			}
		}
	}
	if n := bytes.Count(a, []byte{0, 0}); n > m*k/2 {
		t.Fatalf("%d of %d packed halves are zero: nothing was written", n, m*k)
	}
}
