package vulkan

import (
	"fmt"
	"strings"

	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/engine/quant"
)

// The two numeric tiers.
//
// The fast tier (the default) computes in plain f32 from f32 activations: the decode products
// read weights at full width with x shared across rows (matvec_fast.glsl), attention is split
// over positions and merged (attention_split/attention_merge), RMSNorm is one subgroup-summed
// pass, and Q4_0/Q8_0 prefill takes the cooperative-matrix GEMM like every other type. Each
// kernel is held to a stated error bound against a float64 reference (fast_test.go), and the
// whole model to greedy agreement with llama.cpp up to the first near-tie.
//
// The exact tier (VKLLM_GPU_EXACT=1) rounds activations and sums products in llama.cpp's CPU
// order, bit for bit (matmul.glsl, matmul_exact.glsl, attention.comp, rmsnorm.comp): the same
// logits as the CPU backend, at 2-11x the cost.

// selectNumericTier picks the tier once at Open.
func (c *Context) selectNumericTier() {
	switch {
	case config.GPUExact.Bool():
		c.exact, c.exactWhy = true, "exact tier: llama.cpp's CPU order bit for bit (VKLLM_GPU_EXACT=1)"
	case !c.Info.Features[FeatureSubgroupArith]:
		c.exact, c.exactWhy = true, "exact tier: the fast kernels need subgroup arithmetic in compute shaders, which this device does not report"
	default:
		c.exact, c.exactWhy = false, "fast tier: f32 decode products with shared activations, split attention, Q4_0/Q8_0 prefill on the GEMM tier, the DeltaNet recurrence in plain f32 (VKLLM_GPU_EXACT=1 for llama.cpp's CPU order)"
	}
	if c.Info.SubgroupSize >= 8 { // matvec_fast's shared partials hold 16 subgroups of a 128-thread workgroup
		c.matvecShareBelow = defaultMatvecShareBelow
	}
	c.matvecUnits = 1
	if config.GPUMatvecUnits.Int() == 2 {
		c.matvecUnits = 2
	}
	c.attFP16 = config.GPUAttFP16.Bool()
	c.attFlash = config.GPUAttFlash.Bool() && c.Info.Features[FeatureSubgroupShuffle] && c.Info.SubgroupSize >= 8 && c.Info.SubgroupSize <= 128
	c.flashMinRange = flashMinRange
	c.flashHeads = max(0, config.GPUAttFlashHeads.Int())
	if n := config.GPUAttMinRange.Int(); n > 0 {
		c.flashMinRange = n
	}
	c.attCM2 = config.GPUAttCM2.Bool()
	c.attCM2MinSpan = cm2AttentionMinSpan
	c.stageAhead = config.GPUStageAhead.Bool()
	c.precompileOn = config.GPUPrecompile.Bool()
	c.windowsAhead = c.precompileOn && c.Info.Type != "cpu"
	c.routeInExperts = config.GPURouteInExperts.Bool()
	c.routerRoute = config.GPURouterRoute.Bool()
	c.ropeFold = config.GPURopeFold.Bool()
	c.ropeNorms = config.GPURopeNorms.Bool()
	c.attFreshKV = config.GPUAttFreshKV.Bool()
	c.routeSubgroup = config.GPURouteSubgroup.Bool()
	c.moeTile64 = config.GPUMoETile64.Bool()
	c.moeAhead = config.GPUMoEAhead.Bool()
	c.moeTile64MinK = moeTile64MinK
	if n := config.GPUMoEP64MinK.Int(); n > 0 {
		c.moeTile64MinK = n
	}
	c.routerNorm = config.GPURouterNorm.Bool()
	c.argmaxWide = config.GPUArgmaxWide.Bool()
	c.chain = config.GPUChain.Bool()
	c.sampleOnDevice = config.GPUSample.Bool()
	c.deviceLogits = config.GPUDeviceLogits.Bool()
	c.deltaFast = config.GPUDeltaFast.Bool()
	c.swigluF32 = config.GPUSwiGLUF32.Bool()
	c.deltaRounds = config.GPUDeltaRounds.Bool()
	c.gateFolds = config.GPUGateFolds.Bool()
	c.convFold = config.GPUConvFold.Bool()
	c.x8Coop = config.GPUX8Coop.Bool()
	c.q6kWide = config.GPUQ6KWide.Bool()
	c.normF32 = config.GPUNormF32.Bool()
	c.sharedX8 = config.GPUSharedX8.Bool()
	if n := config.GPUAttSplits.Int(); n > 0 {
		c.splitCap = min(n, maxAttentionSplitsAB)
	}
	c.x8 = config.GPUX8.Bool() && c.Info.Features[FeatureInt8Dot] && c.Info.SubgroupSize >= 8 && c.Info.SubgroupSize <= 128
	if !c.exact && c.x8 {
		c.exactWhy = "fast tier: int8 decode products over activations rounded once per layer input (VKLLM_GPU_X8=0 for f32 ones), split attention, quantized prefill on the GEMM tier, the DeltaNet recurrence in plain f32 (VKLLM_GPU_EXACT=1 for llama.cpp's CPU order)"
	}
	c.fusedDecode = config.GPUFused.Bool() && c.Info.Features[FeatureInt8Dot] && c.Info.SubgroupSize >= 8 && c.Info.SubgroupSize <= 128
}

// numericSelects is the roster's line for the numeric tier.
func (c *Context) numericSelects() string { return c.exactWhy }

// Exact reports whether the context runs the exact tier.
func (c *Context) Exact() bool { return c.exact }

// SetExact switches the tier for Seqs recorded from now on (tests compare both tiers on one
// context; a Resident records its decode pass when made, so switch before NewResident).
func (c *Context) SetExact(exact bool) {
	if !exact && !c.Info.Features[FeatureSubgroupArith] {
		return // the fast kernels cannot run here
	}
	c.exact = exact
}

// fastMatvecTypes are the weight types with a matvec_fast kernel (f32 and f16 for a MoE router
// and a shared expert's gate, which took the generic one-thread-a-row matvec before: the
// router stage of the seed's model cost 2384 µs a token on the H200, 60 a layer).
var fastMatvecTypes = map[quant.Type]bool{quant.F32: true, quant.F16: true, quant.BF16: true, quant.Q4_0: true, quant.Q8_0: true, quant.Q2_K: true, quant.Q3_K: true, quant.Q4_K: true, quant.Q5_K: true, quant.Q6_K: true}

// usesFastMatvec reports whether a product of m tokens with weights of type t and k-element
// rows takes matvec_fast.
func (c *Context) usesFastMatvec(t quant.Type, k, m int) bool {
	return !c.exact && m == 1 && fastMatvecTypes[t] && k%blockElems(t) == 0 && k%32 == 0 // 32-element units
}

// subgroupsPerWorkgroup is the subgroups of a 128-thread workgroup (a device reporting no
// usable subgroup size counts as 32 lanes; the shaders loop, so any real size covers every row).
func (c *Context) subgroupsPerWorkgroup() int {
	sg := c.Info.SubgroupSize
	if sg <= 0 || sg > 128 {
		sg = 32
	}
	return 128 / sg
}

// decodeRowGrid is the grid of a decode product over n rows whose subgroup pass takes nr rows
// (matvec_fast, matvec_dec, matvec_x8): each subgroup its own nr rows, or, on grids under
// matvecShareBelow workgroups, the workgroup's subgroups splitting K of the same nr rows
// (share = 1). rows is the rows a workgroup takes.
func (c *Context) decodeRowGrid(nr, n int) (rows, share, gx, gy uint32) {
	r := nr * c.subgroupsPerWorkgroup()
	if (n+r-1)/r < c.matvecShareBelow {
		r, share = nr, 1
	}
	gx, gy = grid1D((n + r - 1) / r)
	return uint32(r), share, gx, gy
}

// fastMatvecPass is matvec_fast's NR for weights of type t: the rows one subgroup pass takes.
// Q4_0/Q8_0 take NR = 4 (one load of x serves four rows; H200, 14336x4096: Q4_0 776 → 1151
// GB/s, Q8_0 1349 → 1858 GB/s from NR = 2, NR = 8 no better; 8B Q4_0 decode 131 → 175 t/s); the
// K-quants NR = 2 (8B Q4_K decode 115 t/s at 2, 95 at 4: their larger unpacking takes the
// registers).
func (c *Context) fastMatvecPass(t quant.Type) int {
	if t == quant.Q2_K || t == quant.Q3_K || t == quant.Q4_K || t == quant.Q5_K || t == quant.Q6_K {
		return 2
	}
	return 4
}

// defaultMatvecShareBelow is the grid size under which matvec_fast shares each workgroup's NR
// rows among its subgroups (they split K) instead of giving each subgroup its own: a 4096-row
// K-quant product otherwise has 512 workgroups, which left the H200 at 0.34-0.48 TB/s on the
// 8B's attention and FFN-down products against 0.9 TB/s on the 14336-row ones (1792 workgroups).
const defaultMatvecShareBelow = 1024

// fastMatvec2Types have a matvec_fast2_ kernel: two units a lane per pass, so twice the weight
// loads in flight (the Q4_0 product read 1.04 TB/s where Q8_0's, with the same loads per block
// but 1.9x the bytes, read 1.76). Not the default (VKLLM_GPU_MATVEC_UNITS=2 selects it): on the
// H200 the 8B Q4_K decoded at 152.7 t/s with it against 151.9 without, the 8B Q4_0 at 173.8
// against 185.5 (2026-12-02, one call), so loads in flight per lane are not what binds.
var fastMatvec2Types = map[quant.Type]bool{quant.Q4_0: true, quant.Q8_0: true, quant.Q2_K: true, quant.Q3_K: true, quant.Q4_K: true, quant.Q5_K: true, quant.Q6_K: true}

// matVecFast records y (+)= W·x for one token on the fast tier (shapes already checked).
func (s *Seq) matVecFast(t quant.Type, suf string, w, x, y Binding, k, n int, accumulate bool) {
	name := "matvec_fast_" + suf
	if s.c.matvecUnits == 2 && fastMatvec2Types[t] {
		name = "matvec_fast2_" + suf
	}
	kern := s.kernel(name, 3, 24)
	if kern == nil {
		return
	}
	rows, share, gx, gy := s.c.decodeRowGrid(s.c.fastMatvecPass(t), n)
	acc := uint32(0)
	if accumulate {
		acc = 1
	}
	s.Dispatch(kern, Push(uint32(k), uint32(n), rows, gx, acc, share), gx, gy, 1, w, x, y)
}

// actModeFor is how activations are rounded before a product with weights of type t on this
// context. Both tiers round to the 8-bit blocks llama.cpp's quantized products see (without
// that, the random-weight q8_0/q4_0 models' logits move by 0.2-0.3 from llama.cpp's and
// greedy output parts from it at top-2 gaps of 0.13, measured on lavapipe); the fast tier uses
// f16 weights' activations unrounded and lets matvec_fast round Q4_0/Q8_0 blocks in registers
// (roundsOwnActivations).
func (c *Context) actModeFor(t quant.Type) int {
	if !c.exact && t == quant.F16 {
		return actNone
	}
	return actMode(t)
}

// roundsOwnActivations reports whether the product of m tokens with weights of type t rounds
// its activations itself, so the caller skips the quantact pass.
func (c *Context) roundsOwnActivations(t quant.Type, k, m int) bool {
	return c.usesFastMatvec(t, k, m) && (t == quant.Q4_0 || t == quant.Q8_0)
}

// Split attention (flash decoding).

// splitAttentionMaxHeads is the most query heads one attention_split workgroup takes.
const splitAttentionMaxHeads = 8

// usesSplitAttention reports whether attention with head size headDim runs on the split
// kernels on this context.
func (c *Context) usesSplitAttention(headDim int) bool {
	return !c.exact && headDim%8 == 0 && headDim <= 256
}

// attentionHeadsPerGroup is the number of query heads (sharing one KV head) one workgroup
// takes: the largest divisor of the group size with at most 8 heads and 1024 query floats.
func attentionHeadsPerGroup(nHead, nKV, headDim int) int {
	return attentionHeadsAtMost(nHead, nKV, headDim, splitAttentionMaxHeads)
}

// attentionHeadsAtMost is attentionHeadsPerGroup with at most most heads a workgroup.
func attentionHeadsAtMost(nHead, nKV, headDim, most int) int {
	group := nHead / nKV
	for hp := min(group, most); hp > 1; hp-- {
		if group%hp == 0 && hp*headDim <= 1024 {
			return hp
		}
	}
	return 1
}

// maxAttentionSplits bounds the position ranges per (head, token) by default
// (VKLLM_GPU_ATT_SPLITS sets it for A/B measurements, up to maxAttentionSplitsAB); the
// resident plan sizes the partials for m·splits <= window·16 (plan.ScratchSplits).
const maxAttentionSplits, maxAttentionSplitsAB = 64, 256

// attentionSplitCap is the context's bound on the position ranges per (head, token).
func (c *Context) attentionSplitCap() int {
	if c.splitCap > 0 {
		return c.splitCap
	}
	return maxAttentionSplits
}

// attentionSplits is the number of position ranges for m query tokens over a context of
// ctxLen positions with `groups` head groups: enough workgroups to fill a GPU (about 1024;
// lavapipe runs workgroups on a few CPU threads and takes fewer), each range at least 16
// positions of the full context (at 64, a short context's decode step had a workgroup or two
// per head group: 23 µs a layer on the H200's 8B at 80 positions).
func (c *Context) attentionSplits(m, groups, ctxLen int) int {
	target := 1024
	if c.Info.Type == "cpu" {
		target = 16
	}
	n := (target + groups*m - 1) / (groups * m)
	n = min(n, c.attentionSplitCap(), max(1, ctxLen/16))
	if m > 1 {
		n = min(n, 16)
		if c.gemm == gemmCoopmat {
			// attention_prefill_cm: a workgroup takes 4 query tiles (up to 64 tokens), far
			// fewer workgroups than tokens: split every context of 256 positions or more.
			n = min(16, max(1, ctxLen/256))
		}
	}
	return max(1, n)
}

// usesPrefillCoopmatAttention reports whether split attention over m query tokens runs as
// attention_prefill_cm (16-row query tiles on cooperative matrices) rather than one workgroup
// per token: prefill on the cooperative-matrix tier, head sizes that are whole 16-wide
// fragments up to 128, and head groups that tile 16 rows.
func (c *Context) usesPrefillCoopmatAttention(m, headDim, hp int) bool {
	return m > 1 && c.gemm == gemmCoopmat && headDim%16 == 0 && headDim <= 128 && 16%hp == 0
}

// cm2AttentionMinSpan is the causal span (a window's first position plus its rows) from
// which prefill attention takes attention_prefill_cm2: one pass over K and V wins at depth
// (H200, 8B Q4_K pp512 @ d4096 +44%), while over a short span its per-workgroup setup and
// stores cost what the second pass saves (pp512 from position 0 measured no faster).
const cm2AttentionMinSpan = 1024

// usesPrefillCM2Attention reports whether the cooperative-matrix prefill attention over
// headDim-wide heads of a window spanning span positions (0: unknown) runs as
// attention_prefill_cm2 (one pass on NV cooperative matrix 2 with attention_prefill_cm's
// grid): a cm2 device, VKLLM_GPU_ATT_CM2, 64- or 128-wide heads, a span of at least
// c.attCM2MinSpan.
func (c *Context) usesPrefillCM2Attention(headDim, span int) bool {
	return c.cm2Able && c.attCM2 && (headDim == 64 || headDim == 128) && span > 0 && span >= c.attCM2MinSpan
}

// prefillAttentionKernel names the cooperative-matrix prefill attention kernel for
// headDim-wide heads over a span of positions: attention_prefill_cm2_dNN where
// usesPrefillCM2Attention, else
// attention_prefill_cm with Q and P split into fp16 high and low parts (f32-level errors),
// or with VKLLM_GPU_ATT_FP16 rounded to fp16 once (attention_prefill_cm16, half the
// products; within 3e-3).
func (c *Context) prefillAttentionKernel(headDim, span int) string {
	if c.usesPrefillCM2Attention(headDim, span) {
		return fmt.Sprintf("attention_prefill_cm2_d%d", headDim)
	}
	if c.attFP16 {
		return "attention_prefill_cm16"
	}
	return "attention_prefill_cm"
}

// attentionSelects is the roster's line for the split attention's kernel.
func (c *Context) attentionSelects() string {
	switch {
	case c.exact:
		return "the exact tier's attention (llama.cpp's CPU order)"
	case c.attFlash:
		groups := fmt.Sprintf("head groups of at most %d accumulators a lane", flashAccumulators)
		if c.flashHeads > 0 {
			groups = fmt.Sprintf("head groups of at most %d heads (VKLLM_GPU_ATT_FLASH_HEADS)", c.flashHeads)
		}
		return fmt.Sprintf("split attention as attention_flash: eight lanes a position, a running softmax per 8-lane group, ranges of at least %d positions, %s", c.flashMinRange, groups)
	case c.Info.Features[FeatureSubgroupShuffle] && !config.GPUAttFlash.Bool():
		return "split attention as attention_split, a thread a position (VKLLM_GPU_ATT_FLASH=0)"
	default:
		return "split attention as attention_split, a thread a position (without shuffles or with a subgroup under 8 lanes; on an H200 it took the 8B's decode attention at depth 4096 from 639 to 895 µs a token)"
	}
}

// flashMinRange is attention_flash's shortest position range: 64 positions, four a position
// group, so a decode step early in a context fills a range or two instead of every one of its
// splits (each a partial the merge reads).
const flashMinRange = 64

// flashAttentionKernel names the attention_flash variant for hp heads a workgroup (2, 4 or 8
// at most: 2 only over heads wider than 128) over headDim-wide heads (64, 128 or 256 at most:
// one, two or four 16-byte words per lane): the smallest that holds them, so the lanes keep no
// more accumulators than they use; "" for more than 4 heads over heads wider than 128 (no such
// variant: attention_split serves). flashHeadsPerGroup picks hp.
func flashAttentionKernel(hp, headDim int) string {
	heads, words := 4, flashWords(headDim)
	if hp > 4 {
		heads = 8
	}
	if words == 4 && hp <= 2 {
		heads = 2
	}
	if heads == 8 && words > 2 {
		return ""
	}
	return fmt.Sprintf("attention_flash_h%d_k%d", heads, words)
}

// flashWords is the 16-byte words of a K or V row's head that a lane of attention_flash takes:
// 1, 2 or 4 (the variants' KPL) for heads up to 64, 128 or 256 wide.
func flashWords(headDim int) int {
	if words := (headDim + 63) / 64; words <= 2 {
		return words
	}
	return 4
}

// flashAccumulators is the most 16-byte accumulators a lane of attention_flash holds by
// default (heads x words a row x 2): with 32 (8 heads of 128, 4 of 256) the H200 took 27-38 µs
// a layer's decode attention at short contexts against 9-11 µs with 8-16 (2026-12-04).
const flashAccumulators = 16

// flashHeadsPerGroup is the query heads one attention_flash workgroup takes: as many of a KV
// head's as keep its lane's accumulators within flashAccumulators (VKLLM_GPU_ATT_FLASH_HEADS
// sets the most, for A/B measurements). More workgroups then read the same K and V rows.
func (c *Context) flashHeadsPerGroup(nHead, nKV, headDim int) int {
	most := max(1, flashAccumulators/(2*flashWords(headDim)))
	if c.flashHeads > 0 {
		most = c.flashHeads
	}
	return attentionHeadsAtMost(nHead, nKV, headDim, most)
}

// attentionPartialFloats is the f32 count of the partials buffer for up to rows query tokens.
func (c *Context) attentionPartialFloats(rows, nHead, nKV, headDim, ctxLen int) int {
	groups := nKV * (nHead / nKV) / attentionHeadsPerGroup(nHead, nKV, headDim)
	most := 0
	for m := 1; m <= rows; m++ {
		most = max(most, m*c.attentionSplits(m, groups, ctxLen))
	}
	return most * nHead * (headDim + 2)
}

// AttentionSplit records causal attention of m query tokens at positions pos[0].. over the f16
// caches as attention_split over position ranges, then attention_merge into o (see
// Attention for the layout); part holds attentionPartialFloats floats.
func (s *Seq) AttentionSplit(q, k, v, o, pos, part Binding, headDim, nHead, nKV, m, qStride, oStride, ctxLen int, scale float32) {
	s.AttentionSplitFresh(nil, q, k, v, o, pos, part, headDim, nHead, nKV, m, qStride, oStride, ctxLen, scale)
}

// AttentionSplitFresh is AttentionSplit with the step's keys and values fresh from their
// products where fresh is given (see AttentionSplitRangesFresh).
func (s *Seq) AttentionSplitFresh(fresh *FreshKV, q, k, v, o, pos, part Binding, headDim, nHead, nKV, m, qStride, oStride, ctxLen int, scale float32) {
	splits := s.AttentionSplitRangesFresh(fresh, q, k, v, pos, part, headDim, nHead, nKV, m, qStride, ctxLen, scale)
	if splits == 0 {
		return
	}
	km := s.kernel("attention_merge", 2, 20)
	if km == nil {
		return
	}
	s.Barrier()
	s.Dispatch(km, Push(uint32(headDim), uint32(nHead), uint32(m), uint32(oStride), uint32(splits)),
		uint32(nHead), uint32(m), 1, part, o)
}

// AttentionSplitRanges records AttentionSplit's first stage only, the partials of every
// position range in part, and returns the ranges per (head, token) (0 on a recording error):
// attention_merge, or quantize_x8 with X8Input.Merge, makes the output from them.
func (s *Seq) AttentionSplitRanges(q, k, v, pos, part Binding, headDim, nHead, nKV, m, qStride, ctxLen int, scale float32) int {
	return s.AttentionSplitRangesFresh(nil, q, k, v, pos, part, headDim, nHead, nKV, m, qStride, ctxLen, scale)
}

// FreshKV is what a decode step's split attention needs to do rope_kv_norm's work itself
// (attention_flash_rn_*, FRESH_KV in attention_flash.glsl): the step's key and value products
// as they left them (nKV heads each), the step's rotation pairs, the per-head norm weights
// of queries and keys and the norm's epsilon, the rotated dimensions and their pairing. The
// queries the attention binds are then the query product's, not yet normalized or rotated,
// and the caches take the step's key and value rows at pos[0].
type FreshKV struct {
	K, V, CS, QNorm, KNorm Binding
	RopeDim                int
	NeoX                   bool
	Eps                    float32
}

// freshKVKernel names the attention_flash_rn variant that serves a decode step of m tokens
// (FreshKV), or "" where none does: one token, the flash kernel for these heads, the
// fast tier's switch (VKLLM_GPU_ATT_FRESH_KV) on, subgroup sums, and rotated dimensions that
// are even and within the head.
func (c *Context) freshKVKernel(m, headDim, nHead, nKV, ropeDim int) string {
	if m != 1 || c.exact || !c.attFlash || !c.attFreshKV || !c.Info.Features[FeatureSubgroupArith] ||
		headDim%8 != 0 || headDim > 256 || nKV == 0 || nHead%nKV != 0 || ropeDim%2 != 0 || ropeDim > headDim {
		return ""
	}
	name := flashAttentionKernel(c.flashHeadsPerGroup(nHead, nKV, headDim), headDim)
	if name == "" {
		return ""
	}
	return freshKVVariant(name)
}

// freshKVVariant names the attention_flash_rn kernel of an attention_flash variant.
func freshKVVariant(flash string) string {
	return strings.Replace(flash, "attention_flash_", "attention_flash_rn_", 1)
}

// AttentionSplitRangesFresh is AttentionSplitRanges; with fresh (a decode step whose
// freshKVKernel is not "") the attention normalizes and rotates the queries and the step's key
// itself and stores the step's key and value rows in the caches: no rope_kv_norm before it.
func (s *Seq) AttentionSplitRangesFresh(fresh *FreshKV, q, k, v, pos, part Binding, headDim, nHead, nKV, m, qStride, ctxLen int, scale float32) int {
	if headDim%8 != 0 || headDim > 256 || nKV == 0 || nHead%nKV != 0 {
		s.fail(fmt.Errorf("split attention: head size %d (a multiple of 8, max 256) with %d heads over %d KV heads is unsupported", headDim, nHead, nKV))
		return 0
	}
	hp := attentionHeadsPerGroup(nHead, nKV, headDim)
	coop := s.c.usesPrefillCoopmatAttention(m, headDim, hp)
	flash := ""
	if !coop && s.c.attFlash {
		fhp := s.c.flashHeadsPerGroup(nHead, nKV, headDim)
		if flash = flashAttentionKernel(fhp, headDim); flash != "" {
			hp = fhp // no more splits than attentionPartialFloats sized for: more groups, fewer
		}
	}
	groups := nHead / hp
	splits := s.c.attentionSplits(m, groups, ctxLen)
	need := uint64(4 * m * splits * nHead * (headDim + 2))
	if part.Size < need {
		s.fail(fmt.Errorf("split attention: partials binding of %d bytes, need %d", part.Size, need))
		return 0
	}
	if m > maxGroups || groups > maxGroups {
		s.fail(fmt.Errorf("split attention: %d tokens x %d head groups exceed the grid", m, groups))
		return 0
	}
	if coop {
		kc := s.kernel(s.c.prefillAttentionKernel(headDim, s.span), 5, 32)
		if kc == nil {
			return 0
		}
		tq := 16 / hp              // tokens per 16-row query tile
		tiles := (m + tq - 1) / tq // four per workgroup
		s.Dispatch(kc, Push(uint32(headDim), uint32(nHead), uint32(nKV), uint32(m), uint32(qStride), scale, uint32(splits), uint32(hp)),
			uint32(groups), uint32((tiles+3)/4), uint32(splits), q, k, v, part, pos)
	} else {
		if fresh != nil {
			name := s.c.freshKVKernel(m, headDim, nHead, nKV, fresh.RopeDim)
			if name == "" || name != freshKVVariant(flash) {
				s.fail(fmt.Errorf("split attention with the step's keys fresh: no attention_flash_rn kernel for %d tokens, heads of %d over %d KV heads of %d dimensions, %d rotated", m, nHead, nKV, headDim, fresh.RopeDim))
				return 0
			}
			kf := s.kernel(name, 12, 48)
			if kf == nil {
				return 0
			}
			neox := uint32(0)
			if fresh.NeoX {
				neox = 1
			}
			s.Dispatch(kf, Push(uint32(headDim), uint32(nHead), uint32(nKV), uint32(m), uint32(qStride), scale, uint32(splits), uint32(hp), uint32(s.c.flashMinRange),
				uint32(fresh.RopeDim), neox, fresh.Eps),
				uint32(groups), uint32(m), uint32(splits), q, k, v, part, pos, fresh.K, fresh.V, fresh.CS, fresh.QNorm, fresh.KNorm, k, v)
			return splits
		}
		if flash != "" {
			kf := s.kernel(flash, 5, 36)
			if kf == nil {
				return 0
			}
			s.Dispatch(kf, Push(uint32(headDim), uint32(nHead), uint32(nKV), uint32(m), uint32(qStride), scale, uint32(splits), uint32(hp), uint32(s.c.flashMinRange)),
				uint32(groups), uint32(m), uint32(splits), q, k, v, part, pos)
			return splits
		}
		ks := s.kernel("attention_split", 5, 32)
		if ks == nil {
			return 0
		}
		s.Dispatch(ks, Push(uint32(headDim), uint32(nHead), uint32(nKV), uint32(m), uint32(qStride), scale, uint32(splits), uint32(hp)),
			uint32(groups), uint32(m), uint32(splits), q, k, v, part, pos)
	}
	return splits
}

// The fused decode product (matvec_dec.glsl): one dispatch normalizes the token's activations
// (optionally), rounds them to int8 blocks in shared memory and multiplies on int8 dot
// products, optionally for a gate and an up weight at once with SwiGLU applied. It replaces
// the RMSNorm, activation-rounding and SwiGLU stages of the decode step, each a dispatch and a
// barrier (about 4-5 µs on an H200 whatever its size).

// decodeFusedMaxK is the longest row matvec_dec takes (its shared-memory activations).
const decodeFusedMaxK = 16384

// decodeFusedTypes are the weight types with a matvec_dec kernel.
var decodeFusedTypes = map[quant.Type]bool{quant.Q4_0: true, quant.Q8_0: true, quant.Q2_K: true, quant.Q3_K: true, quant.Q4_K: true, quant.Q5_K: true, quant.Q6_K: true}

// usesFusedDecode reports whether a one-token product with weights of type t and k-element
// rows can take matvec_dec on this context.
func (c *Context) usesFusedDecode(t quant.Type, k int) bool {
	return !c.exact && c.fusedDecode && decodeFusedTypes[t] && k%blockElems(t) == 0 && k%32 == 0 && k <= decodeFusedMaxK
}

// matvec_dec's flags.
const (
	decodeNorm = 1 // RMSNorm the input first (binding 3 holds the norm's weight)
	decodePair = 2 // a second weight (binding 4): the output is silu(W·x)·(W2·x)
)

// FusedDecodeOptions are the optional parts of a fused decode product.
type FusedDecodeOptions struct {
	Norm       *Binding // RMSNorm weight: normalize x first (nil: x as it is)
	Eps        float32  // the norm's epsilon
	Pair       *Binding // second weight of the same type and shape: y = silu(W·x)·(Pair·x)
	Accumulate bool     // y += W·x (not with Pair)
}

// MatVecFused records the fused decode product of one token: y[r] (+)= W[r]·round(x'), x' the
// RMSNorm of x when opt.Norm is set, rounded to the int8 blocks llama.cpp's products see for
// weight type t; with opt.Pair, y[r] = silu(W[r]·x')·(Pair[r]·x'). The caller checks
// usesFusedDecode first.
func (s *Seq) MatVecFused(t quant.Type, w, x, y Binding, k, n int, opt FusedDecodeOptions) {
	suf, ok := weightSuffix(t)
	if !ok || !s.c.usesFusedDecode(t, k) {
		s.fail(fmt.Errorf("fused decode product: weight type %v with rows of %d has no matvec_dec kernel on this device", t, k))
		return
	}
	if opt.Pair != nil && opt.Accumulate {
		s.fail(fmt.Errorf("fused decode product: a paired product does not accumulate"))
		return
	}
	kern := s.kernel("matvec_dec_"+suf, 5, 32)
	if kern == nil {
		return
	}
	flags, g, w2 := uint32(0), x, w
	if opt.Norm != nil {
		flags |= decodeNorm
		g = *opt.Norm
	}
	if opt.Pair != nil {
		flags |= decodePair
		w2 = *opt.Pair
	}
	rows, share, gx, gy := s.c.decodeRowGrid(s.c.fastMatvecPass(t), n)
	acc := uint32(0)
	if opt.Accumulate {
		acc = 1
	}
	s.Dispatch(kern, Push(uint32(k), uint32(n), rows, gx, acc, share, flags, opt.Eps), gx, gy, 1, w, x, y, g, w2)
}
