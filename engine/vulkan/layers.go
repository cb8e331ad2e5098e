package vulkan

import (
	"math"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// The parts of a layer that the architectures compose (arch_*.go): attention with its
// variants and the dense SwiGLU FFN (the mixture-of-experts FFN is moeffn.go's moeFFN). Each
// part reads the residual stream r.x of m rows and adds its output to it.

// residentArch is one architecture of the resident forward: the per-layer vectors it adds to
// llama's weights and its layer, a composition of the parts. Each arch_*.go file registers one.
type residentArch struct {
	vectors func(h model.Hyperparameters, l *model.Layer, lw *layerWeights) []layerVector // nil: none
	layer   func(r *Resident, s *Seq, l *layerWeights, m int)
}

// residentArchs are the architectures the resident driver runs, by GGUF name.
var residentArchs = map[string]residentArch{}

// layerVector is a per-layer vector an architecture uploads: where it goes, its weights and
// length, and whether a file may leave it out.
type layerVector struct {
	dst      *vector
	src      model.Vector
	n        int
	optional bool
}

// stamper returns the profiling stamp of s (a no-op unless VKLLM_GPU_PROF).
func (r *Resident) stamper(s *Seq) func(string) {
	return func(label string) {
		if r.prof {
			s.Stamp(label)
		}
	}
}

// qkVariant is what an architecture does to the projected queries, keys and values before the
// rotary embedding (qwen2's biases, qwen3's per-head norms); nil: nothing (llama).
type qkVariant func(r *Resident, s *Seq, l *layerWeights, m int)

// attention records x += O·attention(rope(Q), rope(K), V) with Q, K, V projected from
// RMSNorm(x) (the variant applied to them), the keys and values stored in the layer's cache
// at the rows' positions.
func (r *Resident) attention(s *Seq, l *layerWeights, m int, variant qkVariant) {
	h := r.h
	dim, qd, kd, vd := h.Dim, h.QDim(), h.KDim(), h.VDim()
	stamp := r.stamper(s)
	qkv := []projection{{l.q, r.q, qd, false}, {l.k, r.k, kd, false}, {l.v, r.v, vd, false}}
	roped := r.foldsRopeKV(m, variant, qkv)
	if roped {
		r.projectQKVRoped(s, l, qkv)
	} else {
		r.normProject(s, l.attnNorm, dim, m, stamp, qkv...)
	}
	s.Barrier()
	// the variant with per-head norms (headNorms, the only one reading them) runs inside
	// rope_kv_norm where that serves
	normsInRope := !roped && variant != nil && r.ropeTakesHeadNorms(l, m)
	fresh := r.freshKV(l, m, normsInRope)
	if variant != nil && !normsInRope {
		variant(r, s, l, m)
		s.Barrier()
	}
	stamp("qkv")
	out := projection{l.o, r.x, dim, true}
	// A decode step on the int8 products folds the attention merge into the output product's
	// rounding (quantize_x8 with X8Input.Merge): one stage fewer.
	if m == 1 && r.attPart != nil && h.HeadDim%4 == 0 && r.takesX8(qd, m, []projection{out}) {
		if splits := r.attend(s, l, m, true, roped, normsInRope, nil, fresh); splits > 0 { // 0: the recording failed; Seq holds the error
			r.projectX8(s, r.attPart.All(), X8Input{Merge: true, HeadDim: h.HeadDim, Heads: h.Heads, Splits: splits}, qd, m, []projection{out})
			s.Barrier()
			r.stamper(s)("attn_out")
		}
		return
	}
	r.attend(s, l, m, false, roped, normsInRope, nil, fresh)
	r.attnOut(s, l, m)
}

// freshKV returns what a decode step's split attention needs to normalize and rotate the
// step's queries and key itself and store its key and value rows (VKLLM_GPU_ATT_FRESH_KV), or
// nil where rope_kv_norm's stage serves: the per-head norms inside the rotation (normsInRope),
// split attention, and an attention_flash_rn kernel for the heads.
func (r *Resident) freshKV(l *layerWeights, m int, normsInRope bool) *FreshKV {
	h := r.h
	if !normsInRope || r.attPart == nil || r.c.freshKVKernel(m, h.HeadDim, h.Heads, h.HeadsKV, r.ropeDims) == "" {
		return nil
	}
	return &FreshKV{K: r.k.All(), V: r.v.All(), CS: r.ropeCS.All(), QNorm: l.qNorm.buf.All(), KNorm: l.kNorm.buf.All(),
		RopeDim: r.ropeDims, NeoX: h.Rope.Kind == model.RopeNeoX, Eps: h.NormEps}
}

// x8RopeKVTypes have matvec_x8's ROPE_KV variant (matvec_x8_<suffix>_rkv).
var x8RopeKVTypes = map[quant.Type]bool{quant.Q4_0: true, quant.Q8_0: true, quant.Q4_K: true, quant.Q5_K: true, quant.Q6_K: true}

// foldsRopeKV reports whether a step of m rows ends its query, key and value products as
// rope_kv does (MatVecX8RopeKV) instead of running rope_kv after them: one token on the int8
// products, no variant between the products and the rotation, adjacent-pair (not NeoX)
// rotation, each weight one slice of a type with the variant (VKLLM_GPU_ROPE_FOLD).
func (r *Resident) foldsRopeKV(m int, variant qkVariant, qkv []projection) bool {
	if m != 1 || variant != nil || !r.c.ropeFold || r.h.Rope.Kind == model.RopeNeoX || r.ropeDims%2 != 0 || r.h.HeadDim%2 != 0 ||
		!r.takesX8(r.h.Dim, m, qkv) {
		return false
	}
	for _, p := range qkv {
		if len(p.w.slices) != 1 || !x8RopeKVTypes[p.w.typ] {
			return false
		}
	}
	return true
}

// projectQKVRoped records RMSNorm(x)·g rounded once (quantize_x8), then the query, key and
// value products of one token ending as rope_kv does: queries rotated in r.q, keys and values
// in the layer's caches at the token's position.
func (r *Resident) projectQKVRoped(s *Seq, l *layerWeights, qkv []projection) {
	h := r.h
	k := h.Dim
	gb := l.attnNorm.buf.All()
	xq, xs := r.roundX8(s, r.x.All(), X8Input{Norm: &gb, Eps: h.NormEps}, k, qkv[0].w.typ)
	for i, dst := range []*Buffer{r.q, l.kCache, l.vCache} {
		p := qkv[i]
		sl := p.w.slices[0]
		s.MatVecX8RopeKV(p.w.typ, sl.buf.All(), xq, xs, dst.All(), r.ropeCS.All(), r.pos.All(), k, sl.rows, h.HeadDim, r.ropeDims, x8RopeKVMode(i))
	}
}

// attend records the rotation of r.q and r.k and the store of r.k and r.v in the layer's cache
// at the rows' positions (one rope_kv dispatch, rope_kv_norm with headNormed: the per-head
// norms of queries and keys first, the queries read from gatedQ where given; nothing where
// roped says the products did it, nor with fresh: the split attention does that work itself),
// then causal
// attention into r.att; with partials, split attention's ranges only, left in r.attPart for
// the caller to merge, and it returns their count per (head, token).
func (r *Resident) attend(s *Seq, l *layerWeights, m int, partials, roped, headNormed bool, gatedQ *Binding, fresh *FreshKV) (splits int) {
	h := r.h
	qd, kd, vd := h.QDim(), h.KDim(), h.VDim()
	stamp := r.stamper(s)
	if !roped && fresh == nil {
		neox := h.Rope.Kind == model.RopeNeoX
		if headNormed && gatedQ != nil {
			s.RopeKVNormGated(*gatedQ, r.q.All(), r.k.All(), r.v.All(), r.ropeCS.All(), l.kCache.All(), l.vCache.All(), r.pos.All(),
				l.qNorm.buf.All(), l.kNorm.buf.All(), h.HeadDim, h.Heads, m, r.ropeDims, neox, qd, kd, vd, h.NormEps)
		} else if headNormed {
			s.RopeKVNorm(r.q.All(), r.k.All(), r.v.All(), r.ropeCS.All(), l.kCache.All(), l.vCache.All(), r.pos.All(),
				l.qNorm.buf.All(), l.kNorm.buf.All(), h.HeadDim, h.Heads, m, r.ropeDims, neox, qd, kd, vd, h.NormEps)
		} else {
			s.RopeKV(r.q.All(), r.k.All(), r.v.All(), r.ropeCS.All(), l.kCache.All(), l.vCache.All(), r.pos.All(),
				h.HeadDim, h.Heads, m, r.ropeDims, neox, qd, kd, vd)
		}
		s.Barrier()
		stamp("rope_kv")
	}
	scale := float32(1 / math.Sqrt(float64(h.HeadDim)))
	switch {
	case partials:
		splits = s.AttentionSplitRangesFresh(fresh, r.q.All(), l.kCache.All(), l.vCache.All(), r.pos.All(), r.attPart.All(), h.HeadDim, h.Heads, h.HeadsKV, m, qd, r.ctxLen, scale)
	case r.attPart != nil:
		s.AttentionSplitFresh(fresh, r.q.All(), l.kCache.All(), l.vCache.All(), r.att.All(), r.pos.All(), r.attPart.All(), h.HeadDim, h.Heads, h.HeadsKV, m, qd, qd, r.ctxLen, scale)
	default:
		s.Attention(r.q.All(), l.kCache.All(), l.vCache.All(), r.att.All(), r.pos.All(), h.HeadDim, h.Heads, h.HeadsKV, m, qd, qd, scale)
	}
	s.Barrier()
	stamp("attention")
	return splits
}

// attnOut records x += O·att.
func (r *Resident) attnOut(s *Seq, l *layerWeights, m int) {
	r.project(s, r.att.All(), r.h.QDim(), m, projection{l.o, r.x, r.h.Dim, true})
	s.Barrier()
	r.stamper(s)("attn_out")
}

// qkvBias adds the Q, K and V biases (qwen2, qwen2moe; a qwen2moe file may leave any out).
func qkvBias(r *Resident, s *Seq, l *layerWeights, m int) {
	h := r.h
	for _, b := range []struct {
		v vector
		y *Buffer
		n int
	}{{l.qBias, r.q, h.QDim()}, {l.kBias, r.k, h.KDim()}, {l.vBias, r.v, h.VDim()}} {
		if b.v.buf != nil {
			s.AddBias(b.v.buf.All(), b.y.Range(0, uint64(4*m*b.n)), b.n, m)
		}
	}
}

// qkvBiasVectors are qwen2's bias vectors, optional where a file may leave them out.
func qkvBiasVectors(optional bool) func(h model.Hyperparameters, l *model.Layer, lw *layerWeights) []layerVector {
	return func(h model.Hyperparameters, l *model.Layer, lw *layerWeights) []layerVector {
		return []layerVector{{&lw.qBias, l.QBias, h.QDim(), optional}, {&lw.kBias, l.KBias, h.KDim(), optional}, {&lw.vBias, l.VBias, h.VDim(), optional}}
	}
}

// ropeTakesHeadNorms reports whether a decode step's per-head query and key norms (layer l's)
// run inside rope_kv_norm (the fast tier, VKLLM_GPU_ROPE_NORMS) instead of a stage of their
// own. Prefill windows keep the stage: a stage a window is nothing there, and the prompt rows
// stay those the goldens were checked with.
func (r *Resident) ropeTakesHeadNorms(l *layerWeights, m int) bool {
	return m == 1 && !r.c.exact && r.c.ropeNorms && l.qNorm.buf != nil && l.kNorm.buf != nil && r.h.HeadDim%2 == 0 && r.h.HeadDim <= 256
}

// headNorms applies the per-head RMSNorm of queries and keys (qwen3, qwen3moe).
func headNorms(r *Resident, s *Seq, l *layerWeights, m int) {
	h := r.h
	s.RMSNormHeads(r.q, l.qNorm.buf.All(), h.HeadDim, h.Heads, m, h.NormEps)
	s.RMSNormHeads(r.k, l.kNorm.buf.All(), h.HeadDim, h.HeadsKV, m, h.NormEps)
}

// headNormVectors are qwen3's per-head norm weights.
func headNormVectors(h model.Hyperparameters, l *model.Layer, lw *layerWeights) []layerVector {
	return []layerVector{{&lw.qNorm, l.QNorm, h.HeadDim, false}, {&lw.kNorm, l.KNorm, h.HeadDim, false}}
}

// denseFFN records x += down·(silu(gate·RMSNorm(x)) ⊙ up·RMSNorm(x)); a decode step whose
// weights the fused product covers runs gate, up and SwiGLU as one dispatch with the norm and
// the rounding in its prologue.
func (r *Resident) denseFFN(s *Seq, l *layerWeights, m int) {
	h := r.h
	dim, ff := h.Dim, h.FFN
	stamp := r.stamper(s)
	if r.fuses(m, dim, l.gate, l.up) && l.gate.typ == l.up.typ && l.gate.slices[0].rows == l.up.slices[0].rows {
		// gate, up and SwiGLU in one dispatch, the norm and rounding in its prologue
		up, g := l.up.slices[0].buf.All(), l.ffnNorm.buf.All()
		s.MatVecFused(l.gate.typ, l.gate.slices[0].buf.All(), r.x.All(), r.gate.Range(0, uint64(4*ff)), dim, ff,
			FusedDecodeOptions{Norm: &g, Eps: h.NormEps, Pair: &up})
		s.Barrier()
		stamp("ffn_up")
	} else {
		r.normProject(s, l.ffnNorm, dim, m, stamp, projection{l.gate, r.gate, ff, false}, projection{l.up, r.up, ff, false})
		s.Barrier()
		stamp("ffn_up")
		if down := (projection{l.down, r.x, dim, true}); r.takesX8(ff, m, []projection{down}) {
			// SwiGLU folded into the down product's rounding pass
			up := r.up.Range(0, uint64(4*ff))
			r.projectX8(s, r.gate.Range(0, uint64(4*ff)), X8Input{Up: &up}, ff, m, []projection{down})
			s.Barrier()
			stamp("ffn_down")
			return
		}
		if down := (projection{l.down, r.x, dim, true}); r.takesCM2(l.down, ff, m) {
			// SwiGLU folded into the fp16 packing of the down product's input
			up := r.up.Range(0, uint64(4*m*ff))
			r.projectCM2(s, r.gate.Range(0, uint64(4*m*ff)), &up, ff, m, []projection{down}, []bool{false}, false)
			s.Barrier()
			stamp("ffn_down")
			return
		}
		if r.swigluInDown(l.down, ff, m) {
			// an f32 down product computes SwiGLU itself: no stage for it
			sl := l.down.slices[0]
			s.MatVecSwiGLUF32(sl.buf.All(), r.gate.Range(0, uint64(4*ff)), r.up.Range(0, uint64(4*ff)), r.x.Range(0, uint64(4*dim)), ff, dim, true)
			s.Barrier()
			stamp("ffn_down")
			return
		}
		s.SwiGLU(r.gate.Range(0, uint64(4*m*ff)), r.up.Range(0, uint64(4*m*ff)), r.gate.Range(0, uint64(4*m*ff)), m*ff)
		s.Barrier()
		stamp("swiglu")
	}
	r.project(s, r.gate.All(), ff, m, projection{l.down, r.x, dim, true})
	s.Barrier()
	stamp("ffn_down")
}

// swigluF32MaxK bounds the rows matvec_swiglu_f32 takes: every row recomputes its K SwiGLUs,
// cheap for a small f32 model's FFN (stories260K: 172), not for a big one.
const swigluF32MaxK = 2048

// swigluInDown reports whether a decode step's FFN down product of an f32 model takes
// matvec_swiglu_f32, SwiGLU inside it (fast tier, VKLLM_GPU_SWIGLU_F32): one slice, rows of at
// most swigluF32MaxK elements, a multiple of 4.
func (r *Resident) swigluInDown(down weight, ff, m int) bool {
	return m == 1 && !r.c.exact && r.c.swigluF32 && down.typ == quant.F32 && len(down.slices) == 1 && ff%4 == 0 && ff <= swigluF32MaxK
}
