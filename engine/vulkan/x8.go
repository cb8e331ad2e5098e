package vulkan

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// The int8 decode products (matvec_x8.glsl, moe_matvec_x8.glsl): a token's activations are
// rounded once per layer input by quantize_x8 to int8 blocks of 32 (d, q and Σq a block; d
// shared by the 256-block for the K-quants and i-quants, as llama.cpp's Q8_K rounds; the
// blocks lane-interleaved so a subgroup's lanes load neighbouring 16-byte words), and every
// product that reads them runs on int8 dot products. The row-split Q4_0/Q8_0 kernels
// (splitRows: each row's quants, 16-byte aligned, then its f16 scales) are benchmark
// candidates only: the resident driver keeps GGUF's layout, which the GEMMs read too.

// x8Rows are the weight types with int8 decode products (matvec_x8_<suffix>, and
// moe_matvec_x8_<suffix> for experts) and the rows one subgroup pass of matvec_x8 takes.
var x8Rows = map[quant.Type]int{quant.Q4_0: 4, quant.Q8_0: 4, quant.Q4_K: 2, quant.Q5_K: 2, quant.Q6_K: 2, quant.IQ2_XXS: 4}

// x8Kernel is the name of t's int8 decode product in family ("matvec_x8_" or
// "moe_matvec_x8_"), "" when t has none.
func x8Kernel(family string, t quant.Type) string {
	if _, ok := x8Rows[t]; !ok {
		return ""
	}
	suf, _ := weightSuffix(t)
	return family + suf
}

// x8Dense is the name of t's dense int8 decode product on this context (x8Kernel's, or for
// Q4_0, Q8_0 and Q6_K the one that copies its blocks through shared memory under
// VKLLM_GPU_X8_COOP, or for Q6_K the one that takes 64 elements a lane under
// VKLLM_GPU_Q6K_WIDE); the ROPE_KV and CONV variants append their suffixes to it.
func (c *Context) x8Dense(t quant.Type) string {
	name := x8Kernel("matvec_x8_", t)
	switch {
	case c.x8Coop && (t == quant.Q4_0 || t == quant.Q8_0 || t == quant.Q6_K):
		name += "c"
	case c.q6kWide && t == quant.Q6_K:
		name += "w"
	}
	return name
}

// usesX8 reports whether a product of m tokens with weights of type t and k-element rows takes
// matvec_x8 on this context: one token on the fast tier, with int8 dot products.
func (c *Context) usesX8(t quant.Type, k, m int) bool {
	_, ok := x8Rows[t]
	return ok && c.x8 && !c.exact && m == 1 && k%blockElems(t) == 0
}

// MatVecX8 records y (+)= W·x for one token with weights w of type t (n rows of k elements)
// over x rounded by QuantizeX8 into xq and xs.
func (s *Seq) MatVecX8(t quant.Type, w, xq, xs, y Binding, k, n int, accumulate bool) {
	nr, ok := x8Rows[t]
	if !ok || k%blockElems(t) != 0 {
		s.fail(fmt.Errorf("matvec_x8: no kernel for %v rows of %d elements", t, k))
		return
	}
	rowBytes, err := t.RowBytes(k)
	if err != nil {
		s.fail(fmt.Errorf("matvec_x8: %w", err))
		return
	}
	if w.Size < uint64(rowBytes*n) || y.Size < uint64(4*n) || xq.Size < uint64(x8QuantBytes(k)) || xs.Size < uint64(x8ScaleBytes(k)) {
		s.fail(fmt.Errorf("matvec_x8: %v %dx%d: a binding is too small (weights %d of %d bytes, y %d of %d)", t, n, k, w.Size, rowBytes*n, y.Size, 4*n))
		return
	}
	s.matVecX8(s.c.x8Dense(t), nr, w, xq, xs, y, k, n, accumulate)
}

// x8RopeKVMode is what matvec_x8's ROPE_KV variant makes of a decode product's rows.
type x8RopeKVMode uint32

const (
	x8RopeQueries x8RopeKVMode = iota // rotated in place of y
	x8RopeKeys                        // rotated, then f16 into the key cache's row pos[0]
	x8StoreValues                     // f16 into the value cache's row pos[0]
)

// MatVecX8RopeKV records the decode step's query, key or value product (weights w of type t,
// n rows of k elements, over x rounded by QuantizeX8) ending as RopeKV does for one token
// (rope_kv's arithmetic, adjacent-pair rotation: not NeoX): queries rotated into y, keys
// rotated and values as they are packed to f16 into the cache y at row pos[0] (n halves a
// row). cs holds the token's (cos, sin) pairs. It saves rope_kv's stage.
func (s *Seq) MatVecX8RopeKV(t quant.Type, w, xq, xs, y, cs, pos Binding, k, n, headDim, ropeDim int, mode x8RopeKVMode) {
	nr, err := x8Variant(t, w, xq, xs, k, n)
	if err == nil && (nr%2 != 0 || headDim%2 != 0 || ropeDim%2 != 0 || ropeDim > headDim || n%headDim != 0) {
		err = fmt.Errorf("%d rows of heads of %d, %d rotated, %d rows a pass: unsupported", n, headDim, ropeDim, nr)
	}
	out := uint64(4 * n)
	if mode != x8RopeQueries {
		out = 2 * uint64(n) // one row of the cache at least
	}
	if err == nil && (y.Size < out || cs.Size < uint64(4*ropeDim)) {
		err = fmt.Errorf("%v %dx%d: the output or the rotation binding is too small", t, n, k)
	}
	if err != nil {
		s.fail(fmt.Errorf("matvec_x8 rope+kv: %w", err))
		return
	}
	kern := s.kernel(s.c.x8Dense(t)+"_rkv", 6, 36)
	if kern == nil {
		return
	}
	rows, share, gx, gy := s.c.decodeRowGrid(nr, n)
	s.Dispatch(kern, Push(uint32(k), uint32(n), rows, gx, uint32(0), share, uint32(headDim), uint32(ropeDim), uint32(mode)),
		gx, gy, 1, w, xq, xs, y, cs, pos)
}

// x8Variant checks what every variant of a one-token matvec_x8 product with weights of type t
// needs (MatVecX8RopeKV, MatVecX8Conv): a kernel for t, whole blocks, and bindings holding the
// n rows of k elements and their rounded input; it returns the rows of a subgroup's pass.
func x8Variant(t quant.Type, w, xq, xs Binding, k, n int) (int, error) {
	nr, ok := x8Rows[t]
	if !ok || k%blockElems(t) != 0 {
		return 0, fmt.Errorf("%v rows of %d elements: no kernel", t, k)
	}
	rowBytes, err := t.RowBytes(k)
	if err != nil {
		return 0, err
	}
	if w.Size < uint64(rowBytes*n) || xq.Size < uint64(x8QuantBytes(k)) || xs.Size < uint64(x8ScaleBytes(k)) {
		return 0, fmt.Errorf("%v %dx%d: the weight or the rounded input binding is too small", t, n, k)
	}
	return nr, nil
}

// int8AbsentCost is what a device without int8 dot products loses, measured: the decode
// products read f32 activations instead (matvec_fast).
const int8AbsentCost = "decode products on f32 activations: 1.5-1.8x slower decode (8B Q4_0 193 vs 295 t/s, Q4_K 158 vs 279 on an H200, 2026-12-02)"

// int8Selects is the roster's line for int8 dot products.
func (c *Context) int8Selects() string {
	switch {
	case !c.Info.Features[FeatureInt8Dot]:
		return "absent: " + int8AbsentCost
	case c.exact:
		return "present; the exact tier keeps llama.cpp's CPU order, so not used"
	case !c.x8:
		return "present; VKLLM_GPU_X8=0 keeps the f32 decode products (the gate/up pair fused on int8 where VKLLM_GPU_FUSED allows)"
	}
	return "decode products of Q4_0, Q8_0, Q4_K, Q5_K, Q6_K and IQ2_XXS weights (experts too) on int8 dot products over activations rounded once per layer input"
}

// x8QuantBytes is the size of quantize_x8's int8 output for k activations: whole groups of 32
// blocks (the interleaved layout).
func x8QuantBytes(k int) int { return (k/32 + 31) / 32 * 32 * 32 }

// x8ScaleBytes is the size of quantize_x8's per-block (d, Σq) output for k activations.
func x8ScaleBytes(k int) int { return k / 32 * 8 }

// x8MergeVec4 is the vec4s a quantize_x8 workgroup merges and rounds a pass (MERGE_VEC4: its
// 256 threads sum the attention ranges in 4 lanes).
const x8MergeVec4 = 64

// X8Input is what QuantizeX8 rounds: x itself, RMSNorm(x)·Norm (Eps its epsilon),
// silu(x)·Up, x·sigmoid(gate) with the gates in Gate (the gated attention's query
// projection: each head's query then its gate, heads of HeadDim), the merge of attention
// partials (Merge), or that merge gated (Merge and Gate: the gated attention's decode step).
type X8Input struct {
	Norm *Binding
	Eps  float32
	Up   *Binding
	Gate *Binding
	Q8K  bool // 256-blocks rounded as llama.cpp's Q8_K (x8Q8K), not 32-blocks
	// Merge: x holds attention_split's partials (AttentionSplitRanges) for Splits ranges of
	// Heads heads of HeadDim; the rounded input is their merge (attention_merge's output).
	Merge                  bool
	HeadDim, Heads, Splits int
}

// x8Q8K reports whether matvec_x8 products with weights of type t take activations rounded in
// Q8_K's 256-blocks, as llama.cpp's CPU products of the K-quants and i-quants see them (with
// 32-blocks a hybrid IQ2_XXS model's logits moved up to 0.45 from llama.cpp's, past its
// goldens' 0.3); Q4_0 and Q8_0 take Q8_0's 32-blocks.
func x8Q8K(t quant.Type) bool { return actMode(t) == actQ8K }

// QuantizeX8 records quantize_x8 of m rows of k activations x (as in names; rows k apart, the
// up rows too) into xq (m·x8QuantBytes(k)) and xs (m·x8ScaleBytes(k)); k is a multiple of 32.
func (s *Seq) QuantizeX8(x, xq, xs Binding, k, m int, in X8Input) {
	if k%32 != 0 || m < 1 || m > maxGroups {
		s.fail(fmt.Errorf("quantize_x8: %d rows of %d activations (whole 32-blocks, at most %d rows)", m, k, maxGroups))
		return
	}
	ends := 0
	for _, on := range []bool{in.Norm != nil, in.Up != nil, in.Gate != nil, in.Merge} {
		if on {
			ends++
		}
	}
	// the one pair a layer input takes: the gated attention's merged output, gated
	if ends > 1 && !(ends == 2 && in.Gate != nil && in.Merge) {
		s.fail(fmt.Errorf("quantize_x8: a norm, SwiGLU, a gate or an attention merge at once (other than a merge then its gate) is not a layer input"))
		return
	}
	if in.Gate != nil && (in.HeadDim <= 0 || in.HeadDim%4 != 0 || k%in.HeadDim != 0 || in.Gate.Size < uint64(8*m*k)) {
		s.fail(fmt.Errorf("quantize_x8: gating %d rows of %d by heads of %d (a multiple of 4) from %d bytes", m, k, in.HeadDim, in.Gate.Size))
		return
	}
	xBytes := uint64(4 * m * k)
	if in.Merge {
		if in.HeadDim <= 0 || in.HeadDim%4 != 0 || in.Heads*in.HeadDim != k || in.Splits < 1 {
			s.fail(fmt.Errorf("quantize_x8: merging %d heads of %d (a multiple of 4) over %d ranges into rows of %d", in.Heads, in.HeadDim, in.Splits, k))
			return
		}
		xBytes = uint64(4 * m * in.Heads * in.Splits * (in.HeadDim + 2))
	}
	if xq.Size < uint64(m*x8QuantBytes(k)) || xs.Size < uint64(m*x8ScaleBytes(k)) || x.Size < xBytes {
		s.fail(fmt.Errorf("quantize_x8: a binding is too small for %d rows of %d", m, k))
		return
	}
	if in.Q8K && k%256 != 0 {
		s.fail(fmt.Errorf("quantize_x8: %d activations are not whole Q8_K 256-blocks", k))
		return
	}
	name := "quantize_x8"
	if in.Gate != nil {
		name = "quantize_x8_gate" // the gate's arithmetic in a kernel of its own: quantize_x8 stays as it was measured
	}
	kern := s.kernel(name, 5, 24)
	if kern == nil {
		return
	}
	flags, up, g, groups := uint32(0), x, x, uint32((k/4+255)/256)
	if in.Norm != nil {
		flags, g = 1, *in.Norm
	}
	if in.Up != nil {
		flags, up = 2, *in.Up
	}
	if in.Gate != nil {
		flags, up = 16, *in.Gate
	}
	if in.Q8K {
		flags |= 4
	}
	if in.Merge {
		flags |= 8
		groups = uint32((k/4 + x8MergeVec4 - 1) / x8MergeVec4)
	}
	s.Dispatch(kern, Push(uint32(k), flags, in.Eps, uint32(in.HeadDim), uint32(in.Heads), uint32(in.Splits)), groups, uint32(m), 1, x, xq, xs, up, g)
}

// matVecX8 records y (+)= W·x for one token with matvec_x8 kernel name, whose subgroup pass
// takes nr rows, over x rounded by QuantizeX8.
func (s *Seq) matVecX8(name string, nr int, w, xq, xs, y Binding, k, n int, accumulate bool) {
	kern := s.kernel(name, 4, 24)
	if kern == nil {
		return
	}
	rows, share, gx, gy := s.c.decodeRowGrid(nr, n)
	acc := uint32(0)
	if accumulate {
		acc = 1
	}
	s.Dispatch(kern, Push(uint32(k), uint32(n), rows, gx, acc, share), gx, gy, 1, w, xq, xs, y)
}

// takesX8 reports whether every product of ps over k-element inputs of m rows takes
// matvec_x8, with room for the rounded input in r.xq.
func (r *Resident) takesX8(k, m int, ps []projection) bool {
	if uint64(x8QuantBytes(k)+x8ScaleBytes(k)) > r.xq.Size {
		return false
	}
	for _, p := range ps {
		if !r.c.usesX8(p.w.typ, k, m) || x8Q8K(p.w.typ) != x8Q8K(ps[0].w.typ) {
			return false
		}
	}
	return len(ps) > 0
}

// roundX8 records quantize_x8 of one token's k activations x (as in says) into r.xq for
// products with weights of type t, then a barrier; it returns the rounded blocks and scales.
func (r *Resident) roundX8(s *Seq, x Binding, in X8Input, k int, t quant.Type) (xq, xs Binding) {
	qb, sb := uint64(x8QuantBytes(k)), uint64(x8ScaleBytes(k))
	xq, xs = r.xq.Range(0, qb), r.xq.Range(qb, sb)
	in.Q8K = x8Q8K(t)
	s.QuantizeX8(x, xq, xs, k, 1, in)
	s.Barrier()
	return xq, xs
}

// projectX8 records the one-token products among ps whose weights take matvec_x8: x (as in
// says) rounded once by quantize_x8 into r.xq, then each product. It reports which it
// recorded.
func (r *Resident) projectX8(s *Seq, x Binding, in X8Input, k, m int, ps []projection) []bool {
	done := make([]bool, len(ps))
	qb, sb := uint64(x8QuantBytes(k)), uint64(x8ScaleBytes(k))
	if qb+sb > r.xq.Size {
		return done // a tiny model's scratch: the other products serve
	}
	first := -1 // the first x8 product's rounding serves every product that shares it
	for i, p := range ps {
		if !r.c.usesX8(p.w.typ, k, m) {
			continue
		}
		if first < 0 {
			first = i
		}
		done[i] = x8Q8K(p.w.typ) == x8Q8K(ps[first].w.typ)
	}
	if first < 0 {
		return done
	}
	xq, xs := r.roundX8(s, x, in, k, ps[first].w.typ)
	for i, p := range ps {
		if !done[i] {
			continue
		}
		if r.endsWithConv(p.w) {
			sl, ce := p.w.slices[0], p.w.conv
			s.MatVecX8Conv(p.w.typ, sl.buf.All(), xq, xs, sl.out(p.y, 0, 1, p.yStride), ce.taps.All(), ce.state.All(), k, sl.rows, ce.k)
			r.convEnded = true
			continue
		}
		for _, sl := range p.w.slices {
			s.MatVecX8(p.w.typ, sl.buf.All(), xq, xs, sl.out(p.y, 0, 1, p.yStride), k, sl.rows, p.acc)
		}
	}
	return done
}

// moeX8Rows is moe_matvec_x8's NR: the rows of one pair a subgroup takes (one for Q4_K,
// measured faster on the H200, moe_matvec_x8_q4_k.comp), and moe_down_x8's rows of a subgroup.
const moeX8Rows = 2

func moeX8RowsOf(t quant.Type) int {
	if t == quant.Q4_K {
		return 1
	}
	return moeX8Rows
}

// MoEMatVecX8 records the decode step's expert products on int8 dot products: for each of the
// pairs (token t's j-th expert ids[t·used+j]), Y[q·yStride + r] = W_e[r]·x, x the pair's row
// of rounded activations (xPerPair) or its token's, rounded by QuantizeX8 into xq and xs (one
// row after another). w binds experts e0..e0+ne-1 (n rows of k each); with upOff nonzero (a
// multiple of 256) it also holds the up experts that far after the gate experts and Y gets
// silu(gate·x)·(up·x), as SwiGLU computes it.
func (s *Seq) MoEMatVecX8(t quant.Type, w, xq, xs, y, ids Binding, upOff uint64, k, n, e0, ne, used, pairs int, xPerPair bool, yStride int) {
	name := x8Kernel("moe_matvec_x8_", t)
	if name == "" || k <= 0 || k%32 != 0 || k%blockElems(t) != 0 || n <= 0 || ne <= 0 || used <= 0 || pairs <= 0 {
		s.fail(fmt.Errorf("moe matvec x8: %v rows of %d elements (a kernel, a positive multiple of 32 and of the block), %d rows, %d experts, %d pairs", t, k, n, ne, pairs))
		return
	}
	if upOff%256 != 0 || upOff > 1<<32-1 || pairs > maxGroups {
		s.fail(fmt.Errorf("moe matvec x8 %v: up experts at byte %d (a multiple of 256 below 4 GiB), %d pairs (at most %d)", t, upOff, pairs, maxGroups))
		return
	}
	xrows := pairs / used
	if xPerPair {
		xrows = pairs
	}
	if xq.Size < uint64(xrows*x8QuantBytes(k)) || xs.Size < uint64(xrows*x8ScaleBytes(k)) {
		s.fail(fmt.Errorf("moe matvec x8 %v: rounded activations of %d bytes for %d rows of %d", t, xq.Size, xrows, k))
		return
	}
	per := uint32(0)
	if xPerPair {
		per = 1
	}
	gx, gy := s.c.moeX8Grid(t, n)
	kern := s.kernel(name, 5, 36)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(e0), uint32(ne), uint32(used), per, uint32(yStride), gx, uint32(upOff)),
		gx, gy, uint32(pairs), w, xq, xs, y, ids)
}

// moeX8Grid is the grid of moe_matvec_x8's workgroups over n rows of t experts (the pairs along
// z): moeX8RowsOf(t) rows a subgroup.
func (c *Context) moeX8Grid(t quant.Type, n int) (gx, gy uint32) {
	rows := moeX8RowsOf(t) * c.subgroupsPerWorkgroup()
	return grid1D((n + rows - 1) / rows)
}

// MoEMatVecX8Route records a decode step's gate and up products (MoEMatVecX8 with upOff, one
// token) whose workgroups choose the token's experts themselves from the router's logits, as
// MoERoute does (moe_matvec_x8r_<type>: the same choice and weights), the first writing ids and
// wts: the route's own dispatch and stage go (VKLLM_GPU_ROUTE_IN_EXPERTS).
func (s *Seq) MoEMatVecX8Route(t quant.Type, w, xq, xs, y, ids, logits, wts Binding, upOff uint64, k, n, experts, used, yStride int, gating model.Gating, norm bool, scale float32) {
	name := x8Kernel("moe_matvec_x8r_", t)
	if name == "" || k <= 0 || k%32 != 0 || k%blockElems(t) != 0 || n <= 0 || upOff == 0 || upOff%256 != 0 || upOff > 1<<32-1 {
		s.fail(fmt.Errorf("moe matvec x8 route: %v gate and up rows of %d elements (a kernel, a positive multiple of 32 and of the block), %d rows, up experts at byte %d (a nonzero multiple of 256 below 4 GiB)", t, k, n, upOff))
		return
	}
	if err := s.c.checkRouting(experts, used, gating); err != nil {
		s.fail(fmt.Errorf("moe matvec x8 route: %w", err))
		return
	}
	if xq.Size < uint64(x8QuantBytes(k)) || xs.Size < uint64(x8ScaleBytes(k)) || logits.Size < uint64(4*experts) || ids.Size < uint64(4*used) || wts.Size < uint64(4*used) {
		s.fail(fmt.Errorf("moe matvec x8 route %v: %d and %d bytes of rounded input for rows of %d, %d of logits for %d experts, %d and %d of choices for %d", t, xq.Size, xs.Size, k, logits.Size, experts, ids.Size, wts.Size, used))
		return
	}
	if scale == 0 {
		scale = 1
	}
	gx, gy := s.c.moeX8Grid(t, n)
	kern := s.kernel(name, 7, 52)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(0), uint32(experts), uint32(used), uint32(0), uint32(yStride), gx, uint32(upOff),
		uint32(experts), uint32(gating), norm, scale), gx, gy, uint32(used), w, xq, xs, y, ids, logits, wts)
}

// MoEDownX8 records a decode step's expert down products and their combine in one dispatch
// (moe_down_x8): x[r] += Σ_j wts[j]·(W_{ids[j]}[r]·h_j) over the token's used pairs, h_j the
// pair's hidden row rounded by QuantizeX8 into xq and xs, plus sigmoid(g[0])·sh[r] with shared.
// w binds the whole expert tensor (n rows of k elements per expert); sh and g are read only
// with shared.
func (s *Seq) MoEDownX8(t quant.Type, w, xq, xs, x, ids, wts, sh, g Binding, k, n, used int, shared bool) {
	name := x8Kernel("moe_down_x8_", t)
	if name == "" || k <= 0 || k%32 != 0 || k%blockElems(t) != 0 || n <= 0 || used <= 0 {
		s.fail(fmt.Errorf("moe down x8: %v rows of %d elements (a kernel, a positive multiple of 32 and of the block), %d rows, %d pairs", t, k, n, used))
		return
	}
	if xq.Size < uint64(used*x8QuantBytes(k)) || xs.Size < uint64(used*x8ScaleBytes(k)) || x.Size < uint64(4*n) {
		s.fail(fmt.Errorf("moe down x8 %v: rounded activations of %d bytes for %d rows of %d, residual of %d bytes for %d", t, xq.Size, used, k, x.Size, n))
		return
	}
	sh32 := uint32(0)
	if shared {
		sh32 = 1
	}
	rows := moeX8Rows * s.c.subgroupsPerWorkgroup()
	gx, gy := grid1D((n + rows - 1) / rows)
	kern := s.kernel(name, 8, 20)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(used), gx, sh32), gx, gy, 1, w, xq, xs, x, ids, wts, sh, g)
}

// moeX8Layout places the decode step's rounded MoE inputs in r.xq after the room projectX8
// takes for a dim-wide input: the token's normed input, then its used pairs' hidden rows.
// ok is false when r.xq is too small for them.
func (r *Resident) moeX8Layout(dim, ff, used int) (xnQ, xnS, hidQ, hidS Binding, ok bool) {
	align := func(v int) int { return (v + 255) / 256 * 256 }
	// past the room a dim-wide product takes before it (projectX8's rounding, or quantact's 4
	// bytes an element): the router's product may round its input while these are written
	off := align(max(x8QuantBytes(dim)+x8ScaleBytes(dim), 4*dim))
	parts := []int{x8QuantBytes(dim), x8ScaleBytes(dim), used * x8QuantBytes(ff), used * x8ScaleBytes(ff)}
	var b [4]Binding
	for i, n := range parts {
		if uint64(off+n) > r.xq.Size {
			return Binding{}, Binding{}, Binding{}, Binding{}, false
		}
		b[i] = r.xq.Range(uint64(off), uint64(n))
		off = align(off + n)
	}
	return b[0], b[1], b[2], b[3], true
}

// moeTakesX8 reports which of a decode step's expert products take moe_matvec_x8: gate and
// up (one buffer, both types with a kernel), down (its type with a kernel, one binding); none
// without room in r.xq.
func (r *Resident) moeTakesX8(w *moeWeights, m int) (gateUp, down bool) {
	if m != 1 || !r.c.x8 || r.c.exact {
		return false, false
	}
	if _, _, _, _, ok := r.moeX8Layout(r.h.Dim, r.h.MoE.FFN, r.h.MoE.Used); !ok {
		return false, false
	}
	has := func(x experts) bool { return x8Kernel("moe_matvec_x8_", x.typ) != "" && x.cols%blockElems(x.typ) == 0 }
	gateUp = w.upOff != 0 && w.upOff%256 == 0 && has(w.gate) && has(w.up) && w.gate.typ == w.up.typ
	down = has(w.down) && len(w.down.slices) == 1
	return gateUp, down
}
