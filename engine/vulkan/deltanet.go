package vulkan

import (
	"fmt"
	"math"
	"slices"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// The Gated-DeltaNet hybrids' parts (qwen35, qwen35moe; arch_qwen35*.go compose them): the
// DeltaNet block, resident with its recurrent state in device buffers, and the gated attention
// of their other layers. Both compute what engine/cpu's deltaNet and gatedAttention do.

// deltaNetWeights are one DeltaNet layer's weights, its recurrent state and the snapshot slots'
// copies of it (see rewindTo).
type deltaNetWeights struct {
	qkv, z, beta, alpha, out weight
	conv, dtBias, a, norm    vector
	convState                *Buffer                   // (ConvKernel-1) × ConvDim: every channel's last inputs, oldest first
	ssmState                 *Buffer                   // VHeads × StateSize × StateSize, each head's state transposed
	snaps                    [snapshotSlots]layerState // the snapshot slots' copies of convState and ssmState
}

// layerState is one DeltaNet layer's recurrent state: its conv and delta-rule buffers.
type layerState struct{ conv, ssm *Buffer }

func (d *deltaNetWeights) live() layerState { return layerState{d.convState, d.ssmState} }

func (d *deltaNetWeights) free() {
	if d == nil {
		return
	}
	for _, w := range []weight{d.qkv, d.z, d.beta, d.alpha, d.out} {
		for _, s := range w.slices {
			s.buf.Free()
		}
	}
	for _, v := range []vector{d.conv, d.dtBias, d.a, d.norm} {
		v.buf.Free()
	}
	d.convState.Free()
	d.ssmState.Free()
	for _, s := range d.snaps {
		s.conv.Free()
		s.ssm.Free()
	}
}

// deltaScratch is the hybrids' scratch, rows × each width.
type deltaScratch struct {
	mixed       *Buffer // ConvDim: the fused q/k/v projection, then the conv's SiLU output in place
	z           *Buffer // ValueDim: the output gate
	beta, alpha *Buffer // VHeads: the write strength and the log-decay (ssm_gates, in place)
	out         *Buffer // ValueDim: the heads' gated, normed outputs
	qg          *Buffer // 2·QDim: the gated attention's query projection, each head's query then its gate
}

func (d *deltaScratch) free() {
	for _, b := range []*Buffer{d.mixed, d.z, d.beta, d.alpha, d.out, d.qg} {
		b.Free()
	}
}

// deltaStateSizes are the head sizes with a delta_rule_<S> kernel (Qwen3.5's 128, the tiny
// synthetic models' 64).
var deltaStateSizes = map[int]bool{64: true, 128: true}

// maxConvKernel is the longest convolution ssm_conv keeps in registers.
const maxConvKernel = 8

// checkHybrid reports whether the resident driver runs m's Gated DeltaNet layers.
func checkHybrid(m *model.Model) error {
	h := m.Hyper
	if len(h.Recurrent) == 0 {
		return nil
	}
	p := h.SSM
	if !deltaStateSizes[p.StateSize] {
		return fmt.Errorf("Gated DeltaNet state size %d: %w (64 or 128)", p.StateSize, ErrUnsupported)
	}
	if p.ConvKernel < 2 || p.ConvKernel > maxConvKernel {
		return fmt.Errorf("Gated DeltaNet convolution of %d taps: %w (2 to %d)", p.ConvKernel, ErrUnsupported, maxConvKernel)
	}
	if p.KHeads == 0 || p.VHeads%p.KHeads != 0 {
		return fmt.Errorf("Gated DeltaNet with %d value heads over %d key heads: %w", p.VHeads, p.KHeads, ErrUnsupported)
	}
	for i, l := range m.Layers {
		if h.IsRecurrent(i) != (l.DeltaNet != nil) {
			return fmt.Errorf("layer %d: recurrent %v but DeltaNet weights %v: %w", i, h.IsRecurrent(i), l.DeltaNet != nil, ErrUnsupported)
		}
		if d := l.DeltaNet; d != nil && len(d.Conv) != p.ConvKernel*p.ConvDim() {
			return fmt.Errorf("layer %d: %d convolution taps, want %d: %w", i, len(d.Conv), p.ConvKernel*p.ConvDim(), ErrUnsupported)
		}
	}
	return nil
}

// deltaNetMatrices lists a DeltaNet layer's matrices, for CheckModel's type check.
func deltaNetMatrices(l model.Layer) []model.Matrix {
	d := l.DeltaNet
	if d == nil {
		return nil
	}
	return []model.Matrix{d.QKV, d.Z, d.Beta, d.Alpha, d.Out}
}

// uploadDeltaNet uploads layer i's DeltaNet weights (the convolution's taps as f32, as the file
// holds them) and allocates its state and the snapshot slots' copies of it, counted in
// Bytes.Recurrent and Bytes.Scratch as the plan counts them (Scratch.RecurrentState).
func (r *Resident) uploadDeltaNet(i int, d *model.DeltaNet) (*deltaNetWeights, error) {
	p := r.h.SSM
	dw := &deltaNetWeights{}
	ok := false
	defer func() {
		if !ok {
			dw.free()
		}
	}()
	var err error
	for _, m := range []struct {
		dst *weight
		src model.Matrix
	}{{&dw.qkv, d.QKV}, {&dw.z, d.Z}, {&dw.beta, d.Beta}, {&dw.alpha, d.Alpha}, {&dw.out, d.Out}} {
		if *m.dst, err = r.uploadMatrix(m.src); err != nil {
			return nil, err
		}
	}
	conv := model.Vector{Name: fmt.Sprintf("blk.%d.ssm_conv1d.weight", i), Values: d.Conv}
	for _, v := range []struct {
		dst *vector
		src model.Vector
	}{{&dw.conv, conv}, {&dw.dtBias, d.DtBias}, {&dw.a, d.A}, {&dw.norm, d.Norm}} {
		if *v.dst, err = r.uploadVector(v.src); err != nil {
			return nil, err
		}
	}
	convN, ssmN := (p.ConvKernel-1)*p.ConvDim(), p.VHeads*p.StateSize*p.StateSize
	type state struct {
		dst **Buffer
		n   int
	}
	states := []state{{&dw.convState, convN}, {&dw.ssmState, ssmN}}
	for k := range dw.snaps {
		states = append(states, state{&dw.snaps[k].conv, convN}, state{&dw.snaps[k].ssm, ssmN})
	}
	for _, s := range states {
		if *s.dst, err = r.c.NewBuffer(uint64(4*s.n), false); err != nil {
			return nil, fmt.Errorf("layer %d recurrent state: %w", i, err)
		}
		r.Bytes.Recurrent += (*s.dst).Size
		r.Bytes.Scratch += (*s.dst).Size
	}
	dw.qkv.conv = &convEnd{taps: dw.conv.buf, state: dw.convState, k: p.ConvKernel}
	ok = true
	return dw, nil
}

// convEnd is what the DeltaNet's qkv product needs to end as ssm_conv does for one token
// (MatVecX8Conv): the convolution's taps, its state and its width.
type convEnd struct {
	taps, state *Buffer
	k           int
}

// MatVecX8Conv records a decode step's qkv product (weights w of type t, n rows of k elements,
// over x rounded by QuantizeX8) ending as SSMConv does for one token: y gets silu of each
// channel's causal convolution of width convK (taps C × convK), the state (convK-1 rows of n)
// moves on by the product.
func (s *Seq) MatVecX8Conv(t quant.Type, w, xq, xs, y, taps, state Binding, k, n, convK int) {
	nr, err := x8Variant(t, w, xq, xs, k, n)
	if err == nil && (convK < 1 || convK > 8) {
		err = fmt.Errorf("a convolution of %d taps: unsupported (1 to 8)", convK)
	}
	if err == nil && (y.Size < uint64(4*n) || taps.Size < uint64(4*n*convK) || state.Size < uint64(4*n*(convK-1))) {
		err = fmt.Errorf("%v %dx%d: the output, taps or state binding is too small", t, n, k)
	}
	if err != nil {
		s.fail(fmt.Errorf("matvec_x8 conv: %w", err))
		return
	}
	kern := s.kernel(s.c.x8Dense(t)+"_conv", 6, 28)
	if kern == nil {
		return
	}
	rows, share, gx, gy := s.c.decodeRowGrid(nr, n)
	s.Dispatch(kern, Push(uint32(k), uint32(n), rows, gx, uint32(0), share, uint32(convK)), gx, gy, 1, w, xq, xs, y, taps, state)
}

// endsWithConv reports whether a one-token product of w ends as ssm_conv (MatVecX8Conv): the
// DeltaNet's qkv weight in one slice on the fast tier (VKLLM_GPU_CONV_FOLD).
func (r *Resident) endsWithConv(w weight) bool {
	return w.conv != nil && r.c.convFold && !r.c.exact && len(w.slices) == 1 && x8Kernel("matvec_x8_", w.typ) != ""
}

// deltaScratchAllocs are the hybrids' scratch buffers for r.rows rows (none for other models).
func (r *Resident) deltaScratchAllocs() []struct {
	dst **Buffer
	n   int
} {
	h := r.h
	if len(h.Recurrent) == 0 {
		return nil
	}
	p, n := h.SSM, r.rows
	return []struct {
		dst **Buffer
		n   int
	}{{&r.dn.mixed, n * p.ConvDim()}, {&r.dn.z, n * p.ValueDim()}, {&r.dn.beta, n * p.VHeads}, {&r.dn.alpha, n * p.VHeads},
		{&r.dn.out, n * p.ValueDim()}, {&r.dn.qg, n * 2 * h.QDim()}}
}

// deltaNet records x += Out · (rmsnorm(o) · w · silu(z)), o the delta rule's output over m rows
// of the layer's DeltaNet block (see delta_rule.glsl), its state carried in the layer's buffers
// from the previous pass:
//
//	qkv, z, β, α = projections of RMSNorm(x)
//	q, k, v      = silu(conv(qkv))        ssm_conv, updating the conv state (a decode step on
//	                                      the int8 products: the qkv product's end, MatVecX8Conv)
//	β, g         = sigmoid(β), softplus(α + dt_bias) · A   ssm_gates (the fast tier: inside
//	                                      delta_rule_fast)
//	o            = the delta rule of every value head, with the gated norm   delta_rule_<S>
func (r *Resident) deltaNet(s *Seq, l *layerWeights, m int) {
	h, p, d, ds := r.h, r.h.SSM, l.dn, &r.dn
	cd, vd, vh := p.ConvDim(), p.ValueDim(), p.VHeads
	stamp := r.stamper(s)
	fast := r.c.usesFastDeltaRule()
	r.convEnded = false
	r.normProject(s, l.attnNorm, h.Dim, m, stamp, projection{d.qkv, ds.mixed, cd, false}, projection{d.z, ds.z, vd, false},
		projection{d.beta, ds.beta, vh, false}, projection{d.alpha, ds.alpha, vh, false})
	s.Barrier()
	stamp("qkv")
	if !r.convEnded { // else the qkv product ended as ssm_conv (MatVecX8Conv)
		s.SSMConv(ds.mixed.All(), d.conv.buf.All(), d.convState.All(), cd, m, p.ConvKernel)
		if !fast { // delta_rule_fast gates beta and alpha itself
			s.SSMGates(ds.beta.All(), ds.alpha.All(), d.dtBias.buf.All(), d.a.buf.All(), vh, m)
		}
		s.Barrier()
		stamp("ssm_conv")
	}
	scale := 1 / float32(math.Sqrt(float64(p.StateSize)))
	out := projection{d.out, r.x, h.Dim, true}
	if r.deltaRoundsOut(out, m) {
		// the kernel rounds its output for the output product: no rounding stage between
		qb, sb := uint64(x8QuantBytes(vd)), uint64(x8ScaleBytes(vd))
		xq, xs := r.xq.Range(0, qb), r.xq.Range(qb, sb)
		s.DeltaRuleFastX8(ds.mixed.All(), ds.z.All(), ds.beta.All(), ds.alpha.All(), d.dtBias.buf.All(), d.a.buf.All(), d.norm.buf.All(),
			d.ssmState.All(), xq, xs, p.StateSize, p.KHeads, vh, cd, h.NormEps, scale)
		s.Barrier()
		stamp("delta_rule")
		for _, sl := range d.out.slices {
			s.MatVecX8(d.out.typ, sl.buf.All(), xq, xs, sl.out(r.x, 0, 1, h.Dim), vd, sl.rows, true)
		}
		s.Barrier()
		stamp("attn_out")
		return
	}
	if fast {
		s.DeltaRuleFast(ds.mixed.All(), ds.z.All(), ds.beta.All(), ds.alpha.All(), d.dtBias.buf.All(), d.a.buf.All(), d.norm.buf.All(),
			d.ssmState.All(), ds.out.All(), p.StateSize, p.KHeads, vh, m, cd, h.NormEps, scale)
	} else {
		s.DeltaRule(ds.mixed.All(), ds.z.All(), ds.beta.All(), ds.alpha.All(), d.norm.buf.All(), d.ssmState.All(), ds.out.All(),
			p.StateSize, p.KHeads, vh, m, cd, h.NormEps, scale)
	}
	s.Barrier()
	stamp("delta_rule")
	r.project(s, ds.out.All(), vd, m, out)
	s.Barrier()
	stamp("attn_out")
}

// deltaRoundsOut reports whether a step of m rows runs delta_rule_fast_<S>_x8, which rounds its
// output as quantize_x8 rounds the input of the output product out: one token on the fast tier, an
// output weight on the int8 products with 32-blocks (Q4_0, Q8_0; a head holds whole blocks)
// and room in r.xq (VKLLM_GPU_DELTA_ROUNDS).
func (r *Resident) deltaRoundsOut(out projection, m int) bool {
	return m == 1 && r.c.usesFastDeltaRule() && r.c.deltaRounds && r.h.SSM.StateSize%32 == 0 && !x8Q8K(out.w.typ) &&
		r.takesX8(r.h.SSM.ValueDim(), 1, []projection{out})
}

// gatedAttention records the hybrids' attention: Q's projection yields each head's query and an
// output gate; queries and keys are RMS-normed per head and rotated (NEOX over Rope.Dims, the
// M-RoPE sections' still pairs at angle 0: setPositions); the attention's output is multiplied
// by sigmoid(gate) before the output projection.
func (r *Resident) gatedAttention(s *Seq, l *layerWeights, m int) {
	h := r.h
	qd := h.QDim()
	stamp := r.stamper(s)
	r.normProject(s, l.attnNorm, h.Dim, m, stamp,
		projection{l.q, r.dn.qg, 2 * qd, false}, projection{l.k, r.k, h.KDim(), false}, projection{l.v, r.v, h.VDim(), false})
	s.Barrier()
	normsInRope := r.ropeTakesHeadNorms(l, m)
	// A decode step on the int8 products reads the queries out of qg in rope_kv_norm and gates
	// the attention's output in its output product's rounding (VKLLM_GPU_GATE_FOLDS): the
	// attn_qsplit and attn_gate stages go (and attention_merge's, below).
	out := projection{l.o, r.x, h.Dim, true}
	folds := normsInRope && r.c.gateFolds && h.HeadDim%4 == 0 && r.takesX8(qd, m, []projection{out})
	var gatedQ *Binding
	if folds {
		qg := r.dn.qg.All()
		gatedQ = &qg
	} else {
		s.AttnQSplit(r.dn.qg.All(), r.q.All(), h.HeadDim, m*qd)
		s.Barrier()
	}
	if !normsInRope {
		headNorms(r, s, l, m)
		s.Barrier()
	}
	stamp("qkv")
	if folds && r.attPart != nil {
		// and the attention's ranges merge in that rounding too (as attention does for the
		// other architectures): attention_merge's stage goes
		if splits := r.attend(s, l, m, true, false, normsInRope, gatedQ, nil); splits > 0 { // 0: the recording failed; Seq holds the error
			r.projectX8(s, r.attPart.All(), X8Input{Gate: gatedQ, Merge: true, HeadDim: h.HeadDim, Heads: h.Heads, Splits: splits}, qd, m, []projection{out})
			s.Barrier()
			stamp("attn_out")
		}
		return
	}
	r.attend(s, l, m, false, false, normsInRope, gatedQ, nil)
	if folds {
		r.projectX8(s, r.att.All(), X8Input{Gate: gatedQ, HeadDim: h.HeadDim}, qd, m, []projection{out})
		s.Barrier()
		stamp("attn_out")
		return
	}
	s.AttnGate(r.dn.qg.All(), r.att.All(), h.HeadDim, m*qd)
	s.Barrier()
	r.attnOut(s, l, m)
}

// hybridVectors are the gated attention layers' per-head norm weights (a DeltaNet layer
// uploads its vectors with its block).
func hybridVectors(h model.Hyperparameters, l *model.Layer, lw *layerWeights) []layerVector {
	if l.DeltaNet != nil {
		return nil
	}
	return headNormVectors(h, l, lw)
}

// Prefix reuse. A KV cache rewinds by being overwritten; the recurrent state folds in every
// token and cannot. The driver remembers the tokens its state has folded in (history) and keeps
// two device copies of the state (snapshot slots, as engine/cpu's recurrent.go but fixed in
// number, so the plan counts three states per layer): a multi-token evaluation leaves in
// slotBefore the state before its last token (a regenerate sends the same prompt again and the
// engine re-evaluates that token) and in slotAfter the state after it (where the next chat turn
// continues, its reply re-tokenized or not). An evaluation that starts at the history's end just
// continues; one that starts earlier restores the newest slot at or before its position whose
// tokens are still the history's, evaluates the remembered tokens from there to its position
// again, then its own; with no such slot it clears the state and starts from position 0.

// The snapshot slots.
const (
	slotBefore = iota // the state before the last token of the latest multi-token evaluation
	slotAfter         // the state after it
	snapshotSlots
)

// stateSnapshot is what a snapshot slot's buffers hold: the state after tokens (valid false:
// nothing usable).
type stateSnapshot struct {
	tokens []int
	valid  bool
}

// rewindTo makes the recurrent state that of the remembered tokens before pos.
func (r *Resident) rewindTo(pos int) error {
	if len(r.h.Recurrent) == 0 || (!r.stale && pos == len(r.history)) {
		return nil
	}
	if pos > len(r.history) {
		return fmt.Errorf("vulkan eval: position %d is past the %d tokens the recurrent state holds", pos, len(r.history))
	}
	from := -1
	for k, s := range r.snaps {
		n := len(s.tokens)
		if s.valid && n <= pos && (from < 0 || n > len(r.snaps[from].tokens)) && slices.Equal(s.tokens, r.history[:n]) {
			from = k
		}
	}
	keep := append([]int(nil), r.history[:pos]...)
	r.history = r.history[:0]
	r.stale = true
	start := 0
	if from >= 0 {
		slot := from
		if err := r.copyState(func(d *deltaNetWeights) layerState { return d.snaps[slot] }, (*deltaNetWeights).live); err != nil {
			return fmt.Errorf("restore the recurrent state after %d tokens: %w", len(r.snaps[slot].tokens), err)
		}
		start = len(r.snaps[slot].tokens)
	} else {
		for i, l := range r.layers {
			if l.dn == nil {
				continue
			}
			for _, b := range []*Buffer{l.dn.convState, l.dn.ssmState} {
				if err := b.Write(0, make([]byte, b.Size)); err != nil {
					return fmt.Errorf("clear layer %d recurrent state: %w", r.first+i, err)
				}
			}
		}
	}
	r.stale = false
	r.replayed = pos - start
	if start == pos {
		r.history = keep
		return nil
	}
	if _, err := r.evalWindows(keep[start:], start, false); err != nil {
		r.stale = true
		return fmt.Errorf("re-evaluate the %d tokens at positions %d..%d: %w", pos-start, start, pos-1, err)
	}
	r.history = keep
	return nil
}

// evalPrompt evaluates a recurrent model's tokens (more than one) at positions pos.. as
// evalWindows does, in two parts: all but the last token, then the last one, snapshotting the
// state after each (slotBefore, slotAfter). The history before pos is the state's (rewindTo).
func (r *Resident) evalPrompt(tokens []int, pos int, wantAllLogits bool) ([]float32, error) {
	n := len(tokens)
	head, err := r.evalWindows(tokens[:n-1], pos, wantAllLogits)
	if err != nil {
		return nil, err
	}
	if err := r.snapshot(slotBefore, pos, tokens[:n-1]); err != nil {
		return nil, err
	}
	last, err := r.evalWindows(tokens[n-1:], pos+n-1, wantAllLogits)
	if err != nil {
		return nil, err
	}
	if err := r.snapshot(slotAfter, pos, tokens); err != nil {
		return nil, err
	}
	if wantAllLogits {
		return append(head, last...), nil
	}
	return last, nil
}

// snapshot copies the live state, that of history[:pos] and then tokens, into a slot.
func (r *Resident) snapshot(slot, pos int, tokens []int) error {
	s := &r.snaps[slot]
	s.valid = false
	if err := r.copyState((*deltaNetWeights).live, func(d *deltaNetWeights) layerState { return d.snaps[slot] }); err != nil {
		return fmt.Errorf("snapshot the recurrent state after %d tokens: %w", pos+len(tokens), err)
	}
	s.tokens = append(append(s.tokens[:0], r.history[:pos]...), tokens...)
	s.valid = true
	return nil
}

// copyState copies every DeltaNet layer's conv and delta state from src's buffers into dst's,
// device to device, in one command.
func (r *Resident) copyState(src, dst func(d *deltaNetWeights) layerState) error {
	s, err := r.c.NewSeq()
	if err != nil {
		return err
	}
	defer s.Free()
	s.Barrier()
	for _, l := range r.layers {
		if l.dn == nil {
			continue
		}
		from, to := src(l.dn), dst(l.dn)
		s.Copy(from.conv, 0, to.conv, 0, from.conv.Size)
		s.Copy(from.ssm, 0, to.ssm, 0, from.ssm.Size)
	}
	s.Barrier()
	if err := s.Run(); err != nil {
		return fmt.Errorf("copy the recurrent state: %w", err)
	}
	return nil
}

// foldIn records that tokens at pos.. are now in the recurrent state; failed marks the state
// unknown (the next evaluation starts over).
func (r *Resident) foldIn(tokens []int, pos int, failed bool) {
	if len(r.h.Recurrent) == 0 {
		return
	}
	if failed {
		r.stale, r.history = true, r.history[:0]
		return
	}
	r.history = append(r.history[:pos], tokens...)
}

// SSMConv records the causal convolution and SiLU of m rows of c channels in x, in place, with
// k taps per channel in w and the conv state st (see ssm_conv.comp).
func (s *Seq) SSMConv(x, w, st Binding, c, m, k int) {
	if k < 2 || k > maxConvKernel {
		s.fail(fmt.Errorf("ssm conv: %d taps (2 to %d)", k, maxConvKernel))
		return
	}
	kern := s.kernel("ssm_conv", 3, 12)
	if kern == nil {
		return
	}
	gx, gy := grid1D((c + 63) / 64)
	s.Dispatch(kern, Push(uint32(c), uint32(m), uint32(k)), gx, gy, 1, x, w, st)
}

// SSMGates records beta = sigmoid(beta) and alpha = softplus(alpha + dtBias)·a over m rows of
// vh value heads, in place.
func (s *Seq) SSMGates(beta, alpha, dtBias, a Binding, vh, m int) {
	kern := s.kernel("ssm_gates", 4, 8)
	if kern == nil {
		return
	}
	n := vh * m
	gx, gy := grid1D((n + 63) / 64)
	s.Dispatch(kern, Push(uint32(n), uint32(vh)), gx, gy, 1, beta, alpha, dtBias, a)
}

// DeltaRule records the delta rule of m rows over vh value heads of stateSize (each reading
// query and key head h mod kh of x, rows of c), their states in st, and the gated norm of the
// outputs into o, beta and g already gated (SSMGates): delta_rule.glsl, the CPU reference's
// order (the exact tier's).
func (s *Seq) DeltaRule(x, z, beta, g, norm, st, o Binding, stateSize, kh, vh, m, c int, eps, scale float32) {
	if !deltaStateSizes[stateSize] {
		s.fail(fmt.Errorf("delta rule: state size %d has no kernel (64 or 128)", stateSize))
		return
	}
	kern := s.kernel(fmt.Sprintf("delta_rule_%d", stateSize), 7, 24)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(m), uint32(c), uint32(kh), uint32(vh), eps, scale), uint32(vh), 1, 1, x, z, beta, g, norm, st, o)
}

// DeltaRuleFast records DeltaRule on the fast tier (delta_rule_fast.glsl) from the raw beta and
// alpha projections, gated inside the kernel with dtBias and a as SSMGates gates them.
func (s *Seq) DeltaRuleFast(x, z, beta, alpha, dtBias, a, norm, st, o Binding, stateSize, kh, vh, m, c int, eps, scale float32) {
	if !deltaStateSizes[stateSize] {
		s.fail(fmt.Errorf("delta rule: state size %d has no kernel (64 or 128)", stateSize))
		return
	}
	kern := s.kernel(fmt.Sprintf("delta_rule_fast_%d", stateSize), 9, 24)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(m), uint32(c), uint32(kh), uint32(vh), eps, scale), uint32(vh), 1, 1, x, z, beta, alpha, norm, st, o, dtBias, a)
}

// AttnQSplit records the copy of n query values out of the gated query projection qg (each
// head's query then its gate) into q.
func (s *Seq) AttnQSplit(qg, q Binding, headDim, n int) {
	kern := s.kernel("attn_qsplit", 2, 8)
	if kern == nil {
		return
	}
	gx, gy := grid1D((n + 63) / 64)
	s.Dispatch(kern, Push(uint32(n), uint32(headDim)), gx, gy, 1, qg, q)
}

// AttnGate records att *= sigmoid(gate) over n values, the gates those of qg.
func (s *Seq) AttnGate(qg, att Binding, headDim, n int) {
	kern := s.kernel("attn_gate", 2, 8)
	if kern == nil {
		return
	}
	gx, gy := grid1D((n + 63) / 64)
	s.Dispatch(kern, Push(uint32(n), uint32(headDim)), gx, gy, 1, qg, att)
}

// DeltaRuleFastX8 records DeltaRuleFast for one token with its output rounded as QuantizeX8
// rounds a row into 32-blocks (xq, xs: x8QuantBytes and x8ScaleBytes of vh·stateSize) instead
// of written as floats.
func (s *Seq) DeltaRuleFastX8(x, z, beta, alpha, dtBias, a, norm, st, xq, xs Binding, stateSize, kh, vh, c int, eps, scale float32) {
	n := vh * stateSize
	if !deltaStateSizes[stateSize] || xq.Size < uint64(x8QuantBytes(n)) || xs.Size < uint64(x8ScaleBytes(n)) {
		s.fail(fmt.Errorf("delta rule rounded: state size %d (64 or 128) or the rounding's %d and %d bytes do not fit", stateSize, xq.Size, xs.Size))
		return
	}
	kern := s.kernel(fmt.Sprintf("delta_rule_fast_%d_x8", stateSize), 10, 24)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(1), uint32(c), uint32(kh), uint32(vh), eps, scale), uint32(vh), 1, 1, x, z, beta, alpha, norm, st, xq, dtBias, a, xs)
}

// usesFastDeltaRule reports whether the DeltaNet's recurrence runs delta_rule_fast: the fast
// tier (which has subgroup arithmetic), unless VKLLM_GPU_DELTA_FAST=0.
func (c *Context) usesFastDeltaRule() bool { return !c.exact && c.deltaFast }
