package vulkan

import (
	"fmt"
	"math"
	"strings"

	"github.com/vkllm/vkllm/engine/quant"
)

// Kernel entry points: each records one dispatch (no barrier) into a Seq. Shapes are in
// elements; strides are elements between consecutive tokens. Errors (unknown type, bad
// shape, binding over the storage range) are kept in the Seq and returned by End/Run.

// weightSuffix names the shader variant of a weight type.
func weightSuffix(t quant.Type) (string, bool) {
	switch t {
	case quant.F32:
		return "f32", true
	case quant.F16:
		return "f16", true
	case quant.BF16:
		return "bf16", true
	case quant.Q4_0:
		return "q4_0", true
	case quant.Q4_1:
		return "q4_1", true
	case quant.Q5_0:
		return "q5_0", true
	case quant.Q5_1:
		return "q5_1", true
	case quant.Q8_0:
		return "q8_0", true
	case quant.Q2_K:
		return "q2_k", true
	case quant.Q3_K:
		return "q3_k", true
	case quant.Q4_K:
		return "q4_k", true
	case quant.Q5_K:
		return "q5_k", true
	case quant.Q6_K:
		return "q6_k", true
	}
	if suf, ok := iquantSuffix[t]; ok {
		return suf, true
	}
	return "", false
}

// supportedWeightOrder lists the weight types the kernels read, for messages.
var supportedWeightOrder = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0,
	quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4, quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S,
	quant.IQ3_XXS, quant.IQ3_S, quant.IQ1_S, quant.IQ1_M}

// SupportedWeightNames names the weight types the kernels read, comma-separated.
func SupportedWeightNames() string {
	names := make([]string, len(supportedWeightOrder))
	for i, t := range supportedWeightOrder {
		names[i] = t.String()
	}
	return strings.Join(names, ", ")
}

// SupportsWeight reports whether the kernels read weights of type t.
func SupportsWeight(t quant.Type) bool {
	_, ok := weightSuffix(t)
	return ok
}

// blockElems is the granularity of a row of t in the shaders (F32/F16 rows: any length; BF16
// rows whole 32-element units, as dq32 expands them).
func blockElems(t quant.Type) int {
	if t == quant.F32 || t == quant.F16 {
		return 1
	}
	if t == quant.BF16 {
		return 32
	}
	return t.BlockSize()
}

func (s *Seq) kernel(name string, bindings, push int) *Kernel {
	if s.wants != nil {
		// a dry recording collecting kernels: a stand-in, so that the caller goes on to ask for
		// the rest (its dispatch records nothing)
		s.wants[name] = kernelShape{bindings, push}
		return &Kernel{Name: name, bindings: bindings, pushBytes: push}
	}
	if s.err != nil {
		return nil
	}
	k, err := s.c.Kernel(name, bindings, push)
	if err != nil {
		s.fail(err)
		return nil
	}
	return k
}

// matmulLanes is the threads per matrix row for a product over m tokens: GPUs spread a row
// over a subgroup's worth of threads for memory coalescing; CPU implementations (lavapipe) pay
// per workgroup and per barrier, so they take workgroups of eight rows for prefill and, for the
// decode matvec, one thread per row (64 rows per workgroup; measured 2x faster per token than
// eight rows on lavapipe; the Q4_0/Q8_0 kernels then fold their blocks without shared memory).
// The 8-token GEMM needs at least 8 lanes (its Q4_0/Q8_0 fold has one thread per row and token).
func (c *Context) matmulLanes(m int) int {
	if c.lanes != 0 {
		return c.lanes
	}
	if c.Info.Type == "cpu" {
		if m == 1 {
			return 1
		}
		return 8
	}
	return 16
}

// maxGroups is the per-dimension workgroup count every Vulkan device supports.
const maxGroups = 65535

// grid1D splits n workgroups over x and y.
func grid1D(n int) (uint32, uint32) {
	if n <= maxGroups {
		return uint32(n), 1
	}
	return maxGroups, uint32((n + maxGroups - 1) / maxGroups)
}

// MatMul records Y[t][r] (+)= Σ_k W[r][k]·X[t][k] for r < n rows of k elements of weight
// type t and m tokens. m = 1 is the decode matvec. For Q4_0 and Q8_0 weights X must hold
// activations rounded to Q8_0 blocks (QuantizeActivations), which the kernels multiply in
// llama.cpp's integer block order, bit for bit; an unrounded X is rounded to Q8_0 on the fly.
func (s *Seq) MatMul(t quant.Type, w, x, y Binding, k, n, m, xStride, yStride int, accumulate bool) {
	suf, ok := weightSuffix(t)
	if !ok {
		s.fail(fmt.Errorf("matmul: weight type %v has no Vulkan kernel", t))
		return
	}
	if k%blockElems(t) != 0 || k <= 0 || n <= 0 || m <= 0 {
		s.fail(fmt.Errorf("matmul %v: row length %d must be a positive multiple of %d (rows %d, tokens %d)", t, k, blockElems(t), n, m))
		return
	}
	if t != quant.F32 && t != quant.F16 && xStride%4 != 0 {
		s.fail(fmt.Errorf("matmul %v: token stride %d not a multiple of 4 (the kernels read activations as 16-byte vectors)", t, xStride))
		return
	}
	if s.c.usesFastMatvec(t, k, m) {
		s.matVecFast(t, suf, w, x, y, k, n, accumulate)
		return
	}
	if s.c.usesExactGEMM(t, m) {
		s.matMulExact(t, w, x, y, k, n, m, xStride, yStride, accumulate)
		return
	}
	if s.c.usesCoopmat(t, k, m) {
		s.matMulCoopmat(suf, w, x, y, k, n, m, xStride, yStride, accumulate)
		return
	}
	name := "matmul_" + suf // 8 tokens per workgroup
	if m == 1 {
		name = "matvec_" + suf // the single-token variant: no per-token branches
	}
	kern := s.kernel(name, 3, 32)
	if kern == nil {
		return
	}
	if (m+7)/8 > maxGroups {
		s.fail(fmt.Errorf("matmul %v: %d tokens exceed the %d-workgroup grid of the 8-token kernel", t, m, maxGroups))
		return
	}
	lanes := s.c.matmulLanes(m)
	gx, gy := grid1D((n + 64/lanes - 1) / (64 / lanes))
	acc := uint32(0)
	if accumulate {
		acc = 1
	}
	s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(m), uint32(xStride), uint32(yStride), gx, acc, uint32(lanes)),
		gx, gy, uint32((m+7)/8), w, x, y) // m == 1: one z group
}

// Embed records X[t][:] = row ids[t] of the k-element table W for m tokens. W holds rows
// rowBase..rowBase+nRows-1 (a slice of a split table); other ids are left untouched.
func (s *Seq) Embed(t quant.Type, w, ids, x Binding, k, m, rowBase, nRows, xStride int) {
	suf, ok := weightSuffix(t)
	if !ok {
		s.fail(fmt.Errorf("embedding: type %v has no Vulkan kernel", t))
		return
	}
	if k%blockElems(t) != 0 {
		s.fail(fmt.Errorf("embedding %v: row length %d not a multiple of %d", t, k, blockElems(t)))
		return
	}
	kern := s.kernel("embed_"+suf, 3, 20)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(k), uint32(m), uint32(nRows), uint32(xStride), uint32(rowBase)), uint32(m), 1, 1, w, ids, x)
}

// RMSNorm records Y[t] = X[t] / rms(X[t]) ⊙ g over n elements for m tokens.
func (s *Seq) RMSNorm(x, g, y Binding, n, m, stride int, eps float32) {
	name := "rmsnorm"
	if !s.c.exact {
		name = "rmsnorm_fast"
	}
	kern := s.kernel(name, 3, 16)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(n), uint32(m), uint32(stride), eps), uint32(m), 1, 1, x, g, y)
}

// Rope records the rotary embedding in place on m tokens of nHeads heads: cs holds, for token
// t and pair i < ropeDim/2, cos and sin at cs[2(t·ropeDim/2+i)] (RopeAngles computes them);
// neox selects the NEOX pairing (i, i+ropeDim/2) over (2i, 2i+1).
func (s *Seq) Rope(x, cs Binding, headDim, nHeads, m, ropeDim int, neox bool, stride int) {
	if ropeDim%2 != 0 || ropeDim > headDim {
		s.fail(fmt.Errorf("rope: rotary dimensions %d must be even and at most the head size %d", ropeDim, headDim))
		return
	}
	kern := s.kernel("rope", 2, 24)
	if kern == nil {
		return
	}
	nx := uint32(0)
	if neox {
		nx = 1
	}
	total := m * nHeads * ropeDim / 2
	s.Dispatch(kern, Push(uint32(headDim), uint32(nHeads), uint32(m), uint32(ropeDim), nx, uint32(stride)),
		uint32((total+63)/64), 1, 1, x, cs)
}

// RopeKV records, in one dispatch, the rotary embedding of m tokens' queries (nHead heads,
// stride qStride, in place) and keys (rows of kRow = nKV·headDim) and the f16 store of the
// rotated keys and the values (rows of vRow) into the caches at rows pos[0].. : the same results
// as Rope on q and k, a barrier, and KVStore of k and v, one stage sooner.
func (s *Seq) RopeKV(q, k, v, cs, kCache, vCache, pos Binding, headDim, nHead, m, ropeDim int, neox bool, qStride, kRow, vRow int) {
	if ropeDim%2 != 0 || ropeDim > headDim || headDim%2 != 0 || kRow%headDim != 0 || vRow%2 != 0 {
		s.fail(fmt.Errorf("rope+kv store: rotary dimensions %d (even, at most the head size %d), key rows %d (whole heads) and value rows %d (even) do not fit", ropeDim, headDim, kRow, vRow))
		return
	}
	kern := s.kernel("rope_kv", 7, 32)
	if kern == nil {
		return
	}
	nx := uint32(0)
	if neox {
		nx = 1
	}
	total := m*nHead*ropeDim/2 + m*kRow/2 + m*vRow/2
	gx, gy := grid1D((total + 63) / 64)
	s.Dispatch(kern, Push(uint32(headDim), uint32(nHead), uint32(m), uint32(ropeDim), nx, uint32(qStride), uint32(kRow), uint32(vRow)),
		gx, gy, 1, q, k, v, cs, kCache, vCache, pos)
}

// MatVecNormF32 records y = W·(RMSNorm(x)·g) for one token (w: n rows of k f32, k a multiple
// of 4), the norm computed by every workgroup (matvec_norm_f32): the mixture-of-experts router
// of a decode step, without an RMSNorm stage before it.
func (s *Seq) MatVecNormF32(w, x, g, y Binding, k, n int, eps float32) {
	if k%4 != 0 || w.Size < uint64(4*k*n) || x.Size < uint64(4*k) || g.Size < uint64(4*k) || y.Size < uint64(4*n) {
		s.fail(fmt.Errorf("normed f32 product: %d rows of %d (a multiple of 4): a binding is too small", n, k))
		return
	}
	kern := s.kernel("matvec_norm_f32", 4, 12)
	if kern == nil {
		return
	}
	rows := s.c.subgroupsPerWorkgroup() // a row per subgroup
	s.Dispatch(kern, Push(uint32(k), uint32(n), eps), uint32((n+rows-1)/rows), 1, 1, w, x, g, y)
}

// MatVecSwiGLUF32 records y (+)= W·(silu(g)·u) for one token with f32 weights w (n rows of k, a
// multiple of 4): SwiGLU (with the device's exp) inside the product, no stage before it.
func (s *Seq) MatVecSwiGLUF32(w, g, u, y Binding, k, n int, accumulate bool) {
	if k%4 != 0 || w.Size < uint64(4*k*n) || g.Size < uint64(4*k) || u.Size < uint64(4*k) || y.Size < uint64(4*n) {
		s.fail(fmt.Errorf("swiglu f32 product: %d rows of %d (a multiple of 4): a binding is too small", n, k))
		return
	}
	kern := s.kernel("matvec_swiglu_f32", 4, 12)
	if kern == nil {
		return
	}
	acc := uint32(0)
	if accumulate {
		acc = 1
	}
	rows := s.c.subgroupsPerWorkgroup() // a row per subgroup
	s.Dispatch(kern, Push(uint32(k), uint32(n), acc), uint32((n+rows-1)/rows), 1, 1, w, g, u, y)
}

// RopeKVNorm records RopeKV with each query and key head RMS-normalized first (its weight qn
// or kn, eps: rmsnorm_fast's arithmetic), as the per-head norms (RMSNormHeads) then RopeKV
// would in two stages; heads of at most 256 elements.
func (s *Seq) RopeKVNorm(q, k, v, cs, kCache, vCache, pos, qn, kn Binding, headDim, nHead, m, ropeDim int, neox bool, qStride, kRow, vRow int, eps float32) {
	s.ropeKVNorm(nil, q, k, v, cs, kCache, vCache, pos, qn, kn, headDim, nHead, m, ropeDim, neox, qStride, kRow, vRow, eps)
}

// RopeKVNormGated records RopeKVNorm with the queries read from the gated query projection qg
// (each head's query then its gate, m rows of 2·nHead·headDim) and written to q (rows
// qStride apart): no AttnQSplit stage before it.
func (s *Seq) RopeKVNormGated(qg, q, k, v, cs, kCache, vCache, pos, qn, kn Binding, headDim, nHead, m, ropeDim int, neox bool, qStride, kRow, vRow int, eps float32) {
	s.ropeKVNorm(&qg, q, k, v, cs, kCache, vCache, pos, qn, kn, headDim, nHead, m, ropeDim, neox, qStride, kRow, vRow, eps)
}

// ropeKVNorm records rope_kv_norm, or rope_kv_norm_gq reading the queries from qg where given.
func (s *Seq) ropeKVNorm(qg *Binding, q, k, v, cs, kCache, vCache, pos, qn, kn Binding, headDim, nHead, m, ropeDim int, neox bool, qStride, kRow, vRow int, eps float32) {
	if ropeDim%2 != 0 || ropeDim > headDim || headDim%2 != 0 || headDim > 256 || kRow%headDim != 0 || vRow%2 != 0 {
		s.fail(fmt.Errorf("rope+kv store with head norms: rotary dimensions %d (even, at most the head size %d, itself at most 256), key rows %d (whole heads) and value rows %d (even) do not fit", ropeDim, headDim, kRow, vRow))
		return
	}
	if qn.Size < uint64(4*headDim) || kn.Size < uint64(4*headDim) {
		s.fail(fmt.Errorf("rope+kv store with head norms: norm weights of %d and %d bytes, want %d", qn.Size, kn.Size, 4*headDim))
		return
	}
	name, binds := "rope_kv_norm", []Binding{q, k, v, cs, kCache, vCache, pos, qn, kn}
	if qg != nil {
		if qg.Size < uint64(8*m*nHead*headDim) {
			s.fail(fmt.Errorf("rope+kv store with head norms: the gated query projection has %d bytes, want %d", qg.Size, 8*m*nHead*headDim))
			return
		}
		name, binds = "rope_kv_norm_gq", append(binds, *qg)
	}
	kern := s.kernel(name, len(binds), 36)
	if kern == nil {
		return
	}
	nx := uint32(0)
	if neox {
		nx = 1
	}
	groups := m*nHead + m*(kRow/headDim) + (m*vRow/2+63)/64
	gx, gy := grid1D(groups)
	s.Dispatch(kern, Push(uint32(headDim), uint32(nHead), uint32(m), uint32(ropeDim), nx, uint32(qStride), uint32(kRow), uint32(vRow), eps),
		gx, gy, 1, binds...)
}

// RopeAngles fills dst with the cos and sin of every rotary pair for positions pos..pos+n-1,
// the table Rope reads (n·ropeDim floats). The angles follow llama.cpp's float32 recurrence
// (theta_0 = position, theta_{i+1} = theta_i·base^(-2/ropeDim), times scale, divided by the
// pair's frequency factor when factors has one), with cos and sin rounded from double, so the
// rotated queries and keys are those of the CPU reference to the last bit.
func RopeAngles(dst []float32, pos, n, ropeDim int, base, scale float32, factors []float32) {
	half := ropeDim / 2
	thetaScale := float32(math.Pow(float64(base), float64(float32(-2)/float32(ropeDim))))
	for t := 0; t < n; t++ {
		theta := float32(pos + t)
		row := dst[2*t*half : 2*(t+1)*half]
		for i := 0; i < half; i++ {
			ff := float32(1)
			if i < len(factors) && factors[i] != 0 {
				ff = factors[i]
			}
			a := float64(scale * (theta / ff))
			row[2*i] = float32(math.Cos(a))
			row[2*i+1] = float32(math.Sin(a))
			theta *= thetaScale
		}
	}
}

// KVStore records the f16 conversion of m rows of rowElems f32 into the cache at rows
// pos[0].. .
func (s *Seq) KVStore(src, cache, pos Binding, rowElems, m, srcStride int) {
	if rowElems%2 != 0 {
		s.fail(fmt.Errorf("kv store: row of %d elements is not even", rowElems))
		return
	}
	kern := s.kernel("kvstore", 3, 12)
	if kern == nil {
		return
	}
	total := m * rowElems / 2
	s.Dispatch(kern, Push(uint32(rowElems), uint32(m), uint32(srcStride)), uint32((total+63)/64), 1, 1, src, cache, pos)
}

// Attention records causal attention for m query tokens at positions pos[0].. over the f16
// caches (nKV heads of headDim per row), writing nHead·headDim outputs per token.
func (s *Seq) Attention(q, k, v, o, pos Binding, headDim, nHead, nKV, m, qStride, oStride int, scale float32) {
	if headDim > 256 || headDim%2 != 0 || nKV == 0 || nHead%nKV != 0 {
		s.fail(fmt.Errorf("attention: head size %d (max 256, even) with %d heads over %d KV heads is unsupported", headDim, nHead, nKV))
		return
	}
	kern := s.kernel("attention", 5, 28)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(headDim), uint32(nHead), uint32(nKV), uint32(m), uint32(qStride), uint32(oStride), scale),
		uint32(nHead), uint32(m), 1, q, k, v, o, pos)
}

// SwiGLU records Y = silu(G) ⊙ U over n elements.
func (s *Seq) SwiGLU(g, u, y Binding, n int) {
	kern := s.kernel("swiglu", 3, 4)
	if kern == nil {
		return
	}
	gx, gy := grid1D((n + 63) / 64)
	s.Dispatch(kern, Push(uint32(n)), gx, gy, 1, g, u, y)
}

// Add records Y += A over n elements.
func (s *Seq) Add(a, y Binding, n int) {
	kern := s.kernel("add", 2, 4)
	if kern == nil {
		return
	}
	gx, gy := grid1D((n + 63) / 64)
	s.Dispatch(kern, Push(uint32(n)), gx, gy, 1, a, y)
}

// AddBias records Y[t·n+i] += B[i] for i < n over m rows of n elements (contiguous).
func (s *Seq) AddBias(b, y Binding, n, m int) {
	if n <= 0 {
		s.fail(fmt.Errorf("bias: row of %d elements", n))
		return
	}
	kern := s.kernel("bias", 2, 8)
	if kern == nil {
		return
	}
	total := n * m
	gx, gy := grid1D((total + 63) / 64)
	s.Dispatch(kern, Push(uint32(total), uint32(n)), gx, gy, 1, b, y)
}

// RMSNormHeads records the RMSNorm of every head (headDim contiguous elements, the same weight
// g for all) of m rows of nHeads heads, in place in x; rowStride is the row's length in
// elements (nHeads·headDim). Rows are dispatched in chunks of at most maxGroups heads.
func (s *Seq) RMSNormHeads(x *Buffer, g Binding, headDim, nHeads, m int, eps float32) {
	rowBytes := uint64(4 * headDim * nHeads)
	chunk := max(1, maxGroups/nHeads)
	if chunk < m && rowBytes%s.c.minOffsetAlign != 0 {
		s.fail(fmt.Errorf("head norm: %d rows of %d heads exceed %d workgroups and %d-byte rows cannot be bound at an offset (alignment %d)",
			m, nHeads, maxGroups, rowBytes, s.c.minOffsetAlign))
		return
	}
	for t0 := 0; t0 < m; t0 += chunk {
		n := min(chunk, m-t0)
		r := x.Range(uint64(t0)*rowBytes, uint64(n)*rowBytes)
		s.RMSNorm(r, g, r, headDim, n*nHeads, headDim, eps)
	}
}

// Argmax records out[0] = argmax X[:n] (lowest index on ties).
func (s *Seq) Argmax(x, out Binding, n int) {
	kern := s.kernel("argmax", 2, 4)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(n)), 1, 1, 1, x, out)
}

// argmaxChunk is the elements an argmax_wide workgroup scans (256 threads, 8 loads each in
// flight), argmaxMaxParts the most workgroups (the parts buffer's entries).
const (
	argmaxChunk    = 2048
	argmaxMaxParts = 256
)

// ArgmaxWide records out[0] = the index of the largest of x's n values (the lowest on ties)
// over up to argmaxMaxParts workgroups, whose bests go to parts (8 bytes each) and the last of
// which combines them (argmax_wide); arrivals is a 4-byte count, 0 before and left 0.
func (s *Seq) ArgmaxWide(x, out, parts, arrivals Binding, n int) {
	if n <= 0 {
		s.fail(fmt.Errorf("argmax of %d values", n))
		return
	}
	chunk := argmaxChunk
	if groups := (n + chunk - 1) / chunk; groups > argmaxMaxParts {
		chunk = ((n+argmaxMaxParts-1)/argmaxMaxParts + 255) / 256 * 256
	}
	groups := (n + chunk - 1) / chunk
	if x.Size < uint64(4*n) || out.Size < 4 || parts.Size < uint64(8*groups) || arrivals.Size < 4 {
		s.fail(fmt.Errorf("argmax of %d values over %d workgroups: a binding is too small", n, groups))
		return
	}
	kern := s.kernel("argmax_wide", 4, 8)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(n), uint32(chunk)), uint32(groups), 1, 1, x, out, parts, arrivals)
}

// Activation rounding modes of the quantact shader.
const (
	actNone = 0 // F32 weights: activations used as they are
	actF16  = 1 // F16 weights: activations rounded to f16
	actQ8   = 2 // Q4_0/Q5_0/Q8_0 (Q8_0) and Q4_1/Q5_1 (Q8_1): 32-blocks of int8
	actQ8K  = 3 // K-quants (Q8_K): 256-blocks of int8
	actBF16 = 4 // BF16 weights: activations rounded to bfloat16, as llama.cpp's CPU dot product sees them
)

// actMode is how activations are rounded before a product with weights of type t: the same
// rounding llama.cpp's CPU path applies (quant.ActivationType), so greedy output and logits
// agree with it.
func actMode(t quant.Type) int {
	switch t {
	case quant.F16:
		return actF16
	case quant.BF16:
		return actBF16
	}
	switch quant.ActivationType(t) {
	case quant.Q8_0, quant.Q8_1:
		return actQ8
	case quant.Q8_K:
		return actQ8K
	}
	return actNone
}

// QuantizeActivations records Y = X rounded as a matmul with weight type t would see it on
// this context's tier (actModeFor) for m rows of k elements; it reports false, recording nothing, when t uses the
// activations unchanged.
func (s *Seq) QuantizeActivations(t quant.Type, x, y Binding, k, m, stride int) bool {
	mode := s.c.actModeFor(t)
	if mode == actNone {
		return false
	}
	block := map[int]int{actF16: 1, actBF16: 1, actQ8: 32, actQ8K: 256}[mode]
	if k%block != 0 {
		s.fail(fmt.Errorf("activation rounding for %v: row of %d not a multiple of %d", t, k, block))
		return true
	}
	kern := s.kernel("quantact", 2, 16)
	if kern == nil {
		return true
	}
	gx, gy := grid1D((m*k + 255) / 256) // one thread per element
	s.Dispatch(kern, Push(uint32(k), uint32(m), uint32(stride), uint32(mode)), gx, gy, 1, x, y)
	return true
}
