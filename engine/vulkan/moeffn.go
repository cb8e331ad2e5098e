package vulkan

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// The mixture-of-experts FFN block of the resident forward: its weights on the device, its
// scratch and its recording (moeFFN). Routing never leaves the device.

// experts is a 3-D expert tensor resident on the device in its GGUF layout, split at expert
// boundaries into slices that each fit one storage-buffer binding (one slice when the tensor
// fits, so its bytes are the plan's).
type experts struct {
	name              string
	typ               quant.Type
	count, rows, cols int
	slices            []expertSlice
}

type expertSlice struct {
	buf    *Buffer
	off    uint64 // where the experts start in buf
	size   uint64 // their bytes
	e0, ne int    // experts e0..e0+ne-1
}

func (s expertSlice) binding() Binding { return s.buf.Range(s.off, s.size) }

// moeWeights are one layer's router, experts and (qwen2moe) shared expert. Gate and up experts
// of one shape and type share a buffer where both fit one binding, the up experts upOff bytes
// after the gate's (each tensor 256-aligned, as the plan counts them), so a decode step takes
// gate, up and SwiGLU in one dispatch (MoEMatVecSwiGLU); upOff is 0 otherwise.
type moeWeights struct {
	router         weight
	gate, up, down experts
	upOff          uint64
	shared         *sharedExpert
}

// sharedExpert is the FFN every token runs beside the routed experts, scaled by
// sigmoid(gating · x).
type sharedExpert struct {
	gate, up, down, gating weight
}

// moeScratch holds the routing of a window's rows: router logits, the selected ids and their
// weights, the pairs grouped by expert for prefill, each (token, slot) pair's expert output
// and the shared expert's output and gate.
type moeScratch struct {
	logits, ids, wts, out *Buffer
	tiles, sorted         *Buffer // MoEGroup's grouping (uint32)
	shared, gateLogit     *Buffer // nil without a shared expert
	arrivals              *Buffer // router_route_f32's count of finished workgroups (0 between dispatches)
}

// checkMoE reports whether the resident driver can run m's mixture-of-experts layers: their
// routing within moe_route's limits, every expert tensor of a type with a kernel and rows of
// whole 32-element units. Dense models pass.
func checkMoE(m *model.Model) error {
	p := m.Hyper.MoE
	if p.Experts == 0 {
		return nil
	}
	if p.Experts > moeMaxExperts || p.Used > min(p.Experts, moeMaxUsed) {
		return fmt.Errorf("%d experts, %d used per token: %w (at most %d experts and %d used)", p.Experts, p.Used, ErrUnsupported, moeMaxExperts, moeMaxUsed)
	}
	if p.Gating < model.GatingSoftmax || p.Gating > model.GatingSoftmaxSelected {
		return fmt.Errorf("expert gating %v: %w", p.Gating, ErrUnsupported)
	}
	for _, l := range m.Layers {
		mo := l.MoE
		if mo == nil {
			return fmt.Errorf("a layer without a mixture-of-experts FFN in a %s model: %w", m.Hyper.Arch, ErrUnsupported)
		}
		for _, x := range []model.Experts{mo.Gate, mo.Up, mo.Down} {
			if !SupportsWeight(x.Type) {
				return fmt.Errorf("tensor %q of type %v: %w (the Vulkan kernels read %s: requantize it to one of those, or run on the CPU)", x.Name, x.Type, ErrUnsupported, SupportedWeightNames())
			}
			if x.Cols%32 != 0 || x.Cols%blockElems(x.Type) != 0 {
				return fmt.Errorf("tensor %q: expert rows of %d elements are not whole 32-element units of %v: %w", x.Name, x.Cols, x.Type, ErrUnsupported)
			}
		}
	}
	return nil
}

// moeMatrices lists the layer's mixture-of-experts weights that go through the dense kernels
// (the router and the shared expert), for CheckModel's type check.
func moeMatrices(l model.Layer) []model.Matrix {
	if l.MoE == nil {
		return nil
	}
	out := []model.Matrix{l.MoE.Router}
	if s := l.MoE.Shared; s != nil {
		out = append(out, s.Gate, s.Up, s.Down, s.Gating)
	}
	return out
}

// ffnWidth is the widest FFN activation row of a token: the dense FFN's, or every selected
// expert's gate (and up) side by side, or the shared expert's.
func ffnWidth(h model.Hyperparameters) int {
	p := h.MoE
	if p.Experts == 0 {
		return h.FFN
	}
	return max(h.FFN, p.Used*p.FFN, p.SharedFFN)
}

// uploadMoE uploads a layer's router, experts and shared expert.
func (r *Resident) uploadMoE(mo *model.MoE) (*moeWeights, error) {
	w := &moeWeights{}
	var err error
	if w.router, err = r.uploadMatrix(mo.Router); err != nil {
		return nil, err
	}
	if w.gate, w.up, w.upOff, err = r.uploadGateUp(mo.Gate, mo.Up); err != nil {
		return nil, err
	}
	if w.upOff == 0 {
		for _, p := range []struct {
			dst *experts
			src model.Experts
		}{{&w.gate, mo.Gate}, {&w.up, mo.Up}} {
			if *p.dst, err = r.uploadExperts(p.src); err != nil {
				return nil, err
			}
		}
	}
	if w.down, err = r.uploadExperts(mo.Down); err != nil {
		return nil, err
	}
	if s := mo.Shared; s != nil {
		w.shared = &sharedExpert{}
		for _, p := range []struct {
			dst *weight
			src model.Matrix
		}{{&w.shared.gate, s.Gate}, {&w.shared.up, s.Up}, {&w.shared.down, s.Down}, {&w.shared.gating, s.Gating}} {
			if *p.dst, err = r.uploadMatrix(p.src); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// uploadGateUp copies the gate and up expert tensors into one buffer, the up experts at upOff,
// when they have one shape and type and both fit one binding; else it uploads nothing and
// returns upOff 0.
func (r *Resident) uploadGateUp(g, u model.Experts) (gate, up experts, upOff uint64, err error) {
	if g.Type != u.Type || g.Count != u.Count || g.Rows != u.Rows || g.Cols != u.Cols || g.Count == 0 || len(g.Matrices) != g.Count {
		return gate, up, 0, nil
	}
	per := uint64(g.Matrices[0].RowBytes * g.Rows)
	bytes := per * uint64(g.Count)
	off := alignUp(bytes, weightAlign)
	total := off + alignUp(bytes, weightAlign)
	if total > r.c.Info.MaxStorageBufferRange || off > 1<<32-1 {
		return gate, up, 0, nil
	}
	for _, x := range []model.Experts{g, u} {
		if x.Info == nil || uint64(len(x.Info.Data)) < bytes {
			return gate, up, 0, fmt.Errorf("tensor %q: the expert data is missing or short (want %d bytes)", x.Name, bytes)
		}
	}
	buf, err := r.c.NewBuffer(total, false)
	if err != nil {
		return gate, up, 0, fmt.Errorf("upload tensors %q and %q: %w", g.Name, u.Name, err)
	}
	r.Bytes.Weights += buf.Size
	gate = experts{name: g.Name, typ: g.Type, count: g.Count, rows: g.Rows, cols: g.Cols, slices: []expertSlice{{buf: buf, size: bytes, ne: g.Count}}}
	up = experts{name: u.Name, typ: u.Type, count: u.Count, rows: u.Rows, cols: u.Cols, slices: []expertSlice{{buf: buf, off: off, size: bytes, ne: u.Count}}}
	if err := buf.Write(0, g.Info.Data[:bytes]); err != nil {
		return gate, up, 0, fmt.Errorf("upload tensor %q: %w", g.Name, err)
	}
	if err := buf.Write(off, u.Info.Data[:bytes]); err != nil {
		return gate, up, 0, fmt.Errorf("upload tensor %q: %w", u.Name, err)
	}
	return gate, up, off, nil
}

// uploadExperts copies a 3-D expert tensor in its GGUF layout, as few slices of whole experts
// as the storage-buffer range allows.
func (r *Resident) uploadExperts(x model.Experts) (experts, error) {
	w := experts{name: x.Name, typ: x.Type, count: x.Count, rows: x.Rows, cols: x.Cols}
	if x.Count == 0 || len(x.Matrices) != x.Count {
		return w, fmt.Errorf("tensor %q: %d experts with %d matrices", x.Name, x.Count, len(x.Matrices))
	}
	per := x.Matrices[0].RowBytes * x.Rows
	if x.Info == nil || len(x.Info.Data) < per*x.Count {
		return w, fmt.Errorf("tensor %q: the expert data is missing or short (want %d bytes)", x.Name, per*x.Count)
	}
	maxE := int(r.c.Info.MaxStorageBufferRange / uint64(per))
	if maxE <= 0 {
		return w, fmt.Errorf("tensor %q: one expert of %d bytes exceeds the storage-buffer range: %w", x.Name, per, ErrTooLarge)
	}
	data := x.Info.Data
	for e0 := 0; e0 < x.Count; e0 += maxE {
		ne := min(maxE, x.Count-e0)
		buf, err := r.c.NewBuffer(alignUp(uint64(ne*per), weightAlign), false)
		if err != nil {
			return w, fmt.Errorf("upload tensor %q: %w", x.Name, err)
		}
		w.slices = append(w.slices, expertSlice{buf: buf, size: uint64(ne * per), e0: e0, ne: ne})
		if err := buf.Write(0, data[e0*per:(e0+ne)*per]); err != nil {
			return w, fmt.Errorf("upload tensor %q: %w", x.Name, err)
		}
		r.Bytes.Weights += buf.Size
	}
	return w, nil
}

// free releases the layer's mixture-of-experts buffers.
func (w *moeWeights) free() {
	if w == nil {
		return
	}
	freeWeight(w.router)
	xs := []experts{w.gate, w.down}
	if w.upOff == 0 {
		xs = append(xs, w.up) // else up shares gate's buffer
	}
	for _, x := range xs {
		for _, s := range x.slices {
			s.buf.Free()
		}
	}
	if s := w.shared; s != nil {
		for _, m := range []weight{s.gate, s.up, s.down, s.gating} {
			freeWeight(m)
		}
	}
}

func freeWeight(w weight) {
	for _, s := range w.slices {
		s.buf.Free()
	}
}

// allocMoEScratch sizes the routing buffers for r.rows rows (none for a dense model).
func (r *Resident) allocMoEScratch() error {
	h, ms := r.h, &r.moe
	p := h.MoE
	if p.Experts == 0 {
		return nil
	}
	pairs := r.rows * p.Used
	allocs := []struct {
		dst **Buffer
		n   int
	}{{&ms.logits, r.rows * p.Experts}, {&ms.ids, pairs}, {&ms.wts, pairs}, {&ms.out, pairs * h.Dim},
		{&ms.tiles, 1 + 3*moeMaxTiles(pairs, p.Experts)}, {&ms.sorted, pairs}, {&ms.arrivals, 1}}
	if p.SharedFFN > 0 {
		allocs = append(allocs, struct {
			dst **Buffer
			n   int
		}{&ms.shared, r.rows * h.Dim}, struct {
			dst **Buffer
			n   int
		}{&ms.gateLogit, r.rows})
	}
	for _, a := range allocs {
		b, err := r.c.NewBuffer(uint64(4*a.n), false)
		if err != nil {
			return fmt.Errorf("mixture-of-experts scratch: %w", err)
		}
		*a.dst = b
		r.Bytes.Scratch += b.Size
	}
	if err := ms.arrivals.WriteU32(0, []uint32{0}); err != nil {
		return fmt.Errorf("mixture-of-experts scratch: clear the router's arrival count: %w", err)
	}
	if r.captures {
		b, err := r.c.NewBuffer(uint64(4*len(r.layers)*pairs), false)
		if err != nil {
			return fmt.Errorf("mixture-of-experts routing capture: %w", err)
		}
		r.routing = b
	}
	return nil
}

// captureRouting records a copy of the layer's selected ids (m rows of MoERoute's output, after
// the barrier that follows it) into the routing capture's next layer slot.
func (r *Resident) captureRouting(s *Seq, m int) {
	if r.routing == nil {
		return
	}
	used := r.h.MoE.Used
	s.Copy(r.moe.ids, 0, r.routing, uint64(4*r.routed*r.rows*used), uint64(4*m*used))
	r.routed++
}

// Routing returns the experts each mixture-of-experts layer selected for the last n rows of
// the last pass (a prefill window or a decode step; every row of it for n = 0): layer by layer,
// each row's Used ids best first. It needs ResidentOptions.CaptureRouting. An Eval of a
// recurrent model's prompt ends with a pass of its last token alone.
func (r *Resident) Routing(n int) ([][]int, error) {
	if r.routing == nil {
		return nil, fmt.Errorf("routing: the runner was opened without CaptureRouting, or its model has no experts")
	}
	if n == 0 {
		n = r.lastRows
	}
	if n <= 0 || n > r.rows || n > r.lastRows {
		return nil, fmt.Errorf("routing: %d rows asked, the last pass had %d", n, r.lastRows)
	}
	used := r.h.MoE.Used
	out := make([][]int, 0, len(r.layers))
	for l := range r.layers {
		ids, err := r.routing.ReadU32(l*r.rows*used+(r.lastRows-n)*used, n*used)
		if err != nil {
			return nil, fmt.Errorf("routing: read layer %d: %w", l, err)
		}
		row := make([]int, len(ids))
		for i, v := range ids {
			row[i] = int(v)
		}
		out = append(out, row)
	}
	return out, nil
}

func (s *moeScratch) free() {
	for _, b := range []*Buffer{s.logits, s.ids, s.wts, s.out, s.tiles, s.sorted, s.shared, s.gateLogit, s.arrivals} {
		b.Free()
	}
}

// expertsAsIs reports whether a prompt window's expert products of type t over k-element rows
// take their activations as they are, unrounded: where the experts run on fp16 tiles and a
// dense product of that type takes the cooperative matrix 2 F16 kernel, which packs its
// activations to fp16 as they are (projectCM2). Elsewhere they are rounded as the CPU
// reference rounds them, as the dense products are. Either way one window computes one
// arithmetic: a mix (dense products unrounded, experts rounded) matches neither CPU run, and
// on the tiny qwen35moe MXFP4 model it moved two logits of "The little girl and the dog" by
// 0.37 and 0.29 from the unrounded run where either whole form stays within 0.07 of the other
// (the CPU backend with only the experts quantized: 10.985 and 10.688, the H200 10.894 and
// 10.777; unrounded 10.615 and 10.396, rounded 10.549 and 10.417, llama.cpp 10.513 and 10.357).
func (r *Resident) expertsAsIs(t quant.Type, k, m int) bool {
	return m > 1 && r.c.moeUsesCoopmat(t, k) && r.takesCM2(weight{typ: t}, k, m)
}

// expertProjection is one expert product of a shared input: Y = W_e·X per pair.
type expertProjection struct {
	w       experts
	y       *Buffer
	yStride int
}

// projectExperts records the expert products of m tokens' pairs (m·Used) with input x of
// k-element rows: the token's row for every pair (gate, up), or with perPair each pair its own
// row (down). The input is first rounded for each weight type as project rounds it (into xq);
// products sharing a rounding share one pass; with asIs, x goes to the products as it is:
// it already holds the rounding of every product (moeFFN rounds beside the router), or the
// window's products take it unrounded (expertsAsIs). A decode step multiplies pair by pair
// (MoEMatVec); a prefill window takes the pairs grouped by expert (MoEGEMM over moeFFN's
// MoEGroupTiles, in tiles of tilePairs), each expert's rows read once per tile of pairs.
func (r *Resident) projectExperts(s *Seq, x Binding, k, m, tilePairs int, perPair, asIs bool, ps ...expertProjection) {
	used := r.h.MoE.Used
	pairs := m * used
	rows := m
	if perPair {
		rows = pairs
	}
	done := make([]bool, len(ps))
	xq := r.xq.Range(0, uint64(4*rows*k))
	for i := range ps {
		if done[i] {
			continue
		}
		mode := r.c.actModeFor(ps[i].w.typ)
		src := x
		if mode != actNone && !asIs {
			if i > 0 {
				s.Barrier() // an earlier group may still read xq
			}
			s.QuantizeActivations(ps[i].w.typ, x, xq, k, rows, k)
			s.Barrier()
			src = xq
		}
		for j := i; j < len(ps); j++ {
			if done[j] || r.c.actModeFor(ps[j].w.typ) != mode {
				continue
			}
			p := ps[j]
			y := p.y.Range(0, uint64(4*pairs*p.yStride))
			for _, sl := range p.w.slices {
				if m == 1 {
					s.MoEMatVec(p.w.typ, sl.binding(), src, y, r.moe.ids.All(), k, p.w.rows, sl.e0, sl.ne, used, pairs, perPair, k, p.yStride)
					continue
				}
				s.MoEGEMM(p.w.typ, sl.binding(), src, y, r.moe.tiles.All(), r.moe.sorted.All(),
					k, p.w.rows, sl.e0, sl.ne, used, pairs, r.h.MoE.Experts, tilePairs, perPair, k, p.yStride)
			}
			done[j] = true
		}
	}
}

// moeFFN records the mixture-of-experts FFN of m rows, adding its output to the residual x as
// engine/cpu's moe does:
//
//	xn = RMSNorm(x);  logits = router · xn;  ids, w = route(logits)  on the device
//	for each pair (t, j), e its expert (prefill: the pairs grouped by expert first):
//	    h = silu(gate_e · xn_t) * (up_e · xn_t), o = down_e · h
//	with a shared expert: s = down_s(silu(gate_s · xn) * (up_s · xn)), g = gating · xn
//	x += Σ_j w_j · o_j (+ sigmoid(g) · s)
func (r *Resident) moeFFN(s *Seq, l *layerWeights, m int) {
	h, w, ms := r.h, l.moe, &r.moe
	p := h.MoE
	dim, ff, pairs := h.Dim, p.FFN, m*p.Used
	stamp := r.stamper(s)
	x8GateUp, x8Down := r.moeTakesX8(w, m)
	// A decode step on the int8 products may fold the combine into the down product
	// (moe_down_x8); a shared expert then runs first, beside the route and the routed experts.
	fold := x8GateUp && x8Down && (w.shared == nil || p.SharedFFN <= dim)
	sharedX8 := fold && r.sharedTakesX8(w)
	// A decode step whose router is f32 and whose experts take the int8 products normalizes
	// inside the router's product and the experts' rounding (no RMSNorm stage), where no
	// shared expert reads the normalized row, or the shared expert reads the experts' rounding
	// and its gate normalizes too (VKLLM_GPU_NORM_F32).
	normInRouter := x8GateUp && r.c.routerNorm && w.router.typ == quant.F32 && len(w.router.slices) == 1 && dim%4 == 0 &&
		(w.shared == nil || sharedX8 && r.c.normF32 && w.shared.gating.typ == quant.F32 && len(w.shared.gating.slices) == 1)
	if !normInRouter {
		s.RMSNorm(r.x.All(), l.ffnNorm.buf.All(), r.xn.All(), dim, m, dim, h.NormEps)
		s.Barrier()
		stamp("norm")
	}
	xn := r.xn.Range(0, uint64(4*m*dim))
	router := []projection{{w.router, ms.logits, p.Experts, false}}
	if w.shared != nil {
		router = append(router, projection{w.shared.gating, ms.gateLogit, 1, false})
	}
	// The experts' rounding of xn runs beside the router's product when the router reads xn as
	// it is (an f32 router, as the GGUF converters write it): one stage fewer.
	mode := r.c.actModeFor(w.gate.typ)
	upAsIs := r.expertsAsIs(w.gate.typ, dim, m) && r.expertsAsIs(w.up.typ, dim, m)
	early := !upAsIs && mode != actNone && r.c.actModeFor(w.up.typ) == mode && r.c.actModeFor(w.router.typ) == actNone &&
		(w.shared == nil || r.c.actModeFor(w.shared.gating.typ) == actNone)
	// A decode step on int8 products (x8.go) rounds xn once for all its experts, beside the
	// router's product too.
	xnQ, xnS, hidQ, hidS, _ := r.moeX8Layout(dim, ff, p.Used)
	shQ, shS := xnQ, xnS // the shared expert's rounded input (sharedX8)
	if x8GateUp {
		early = false
		src, in := xn, X8Input{}
		if normInRouter {
			g := l.ffnNorm.buf.All()
			src, in = r.x.Range(0, uint64(4*dim)), X8Input{Norm: &g, Eps: h.NormEps}
		}
		in.Q8K = x8Q8K(w.gate.typ)
		s.QuantizeX8(src, xnQ, xnS, dim, 1, in)
		if sharedX8 && x8Q8K(w.shared.gate.typ) != in.Q8K {
			// its own blocks, where projectX8 puts a dim-wide rounding (before xnQ)
			qb, sb := uint64(x8QuantBytes(dim)), uint64(x8ScaleBytes(dim))
			shQ, shS = r.xq.Range(0, qb), r.xq.Range(qb, sb)
			in.Q8K = !in.Q8K
			s.QuantizeX8(src, shQ, shS, dim, 1, in)
		}
	}
	expertIn := xn
	if early {
		expertIn = r.xq.Range(0, uint64(4*m*dim))
		s.QuantizeActivations(w.gate.typ, xn, expertIn, dim, m, dim)
	}
	// A decode step's gate and up products may choose the experts themselves (no route stage),
	// or, without a shared expert, the router's last workgroup does (router_route_f32: no route
	// stage either).
	routeIn := r.c.routeInExperts && x8GateUp && !sharedX8 && w.upOff != 0
	routerRoutes := !routeIn && normInRouter && w.shared == nil && r.c.routerRoute
	if routerRoutes {
		s.RouterRouteF32(w.router.slices[0].buf.All(), r.x.Range(0, uint64(4*dim)), l.ffnNorm.buf.All(), ms.logits.Range(0, uint64(4*p.Experts)),
			ms.ids.Range(0, uint64(4*pairs)), ms.wts.Range(0, uint64(4*pairs)), ms.arrivals.All(), dim, p.Experts, p.Used, h.NormEps, p.Gating, p.NormWeights, p.WeightsScale)
	} else if normInRouter {
		s.MatVecNormF32(w.router.slices[0].buf.All(), r.x.Range(0, uint64(4*dim)), l.ffnNorm.buf.All(), ms.logits.Range(0, uint64(4*p.Experts)), dim, p.Experts, h.NormEps)
		if w.shared != nil {
			s.MatVecNormF32(w.shared.gating.slices[0].buf.All(), r.x.Range(0, uint64(4*dim)), l.ffnNorm.buf.All(), ms.gateLogit.Range(0, 4), dim, 1, h.NormEps)
		}
	} else {
		r.project(s, xn, dim, m, router...)
	}
	s.Barrier()
	stamp("router")
	if !routeIn && !routerRoutes {
		s.MoERoute(ms.logits.Range(0, uint64(4*m*p.Experts)), ms.ids.Range(0, uint64(4*pairs)), ms.wts.Range(0, uint64(4*pairs)),
			p.Experts, p.Used, m, p.Gating, p.NormWeights, p.WeightsScale)
	}
	switch {
	case routeIn:
	case routerRoutes:
		r.captureRouting(s, m)
	case sharedX8:
		// the shared expert's gate and up beside the route; then the rest in three stages
		r.sharedGateUpX8(s, w.shared, shQ, shS)
		s.Barrier()
		r.captureRouting(s, m)
		stamp("route")
		r.moeDecodeWithSharedX8(s, w, xnQ, xnS, hidQ, hidS)
		return
	case fold && w.shared != nil:
		r.sharedExpert(s, w.shared, xn, m)
		s.Barrier()
	default:
		s.Barrier()
	}
	if !routeIn && !routerRoutes {
		r.captureRouting(s, m)
		stamp("route")
	}
	tilePairs := r.c.moeGroupTile(w.gate.typ, w.up.typ, w.down.typ, dim, ff)
	if m > 1 {
		s.MoEGroupTiles(ms.ids.Range(0, uint64(4*pairs)), ms.tiles.All(), ms.sorted.All(), pairs, p.Experts, tilePairs)
		s.Barrier()
		stamp("group") // one workgroup (a sort in shared memory): apart from the experts' products in profiles
	}
	hid := r.gate.Range(0, uint64(4*pairs*ff))
	if routeIn {
		sl := w.gate.slices[0]
		s.MoEMatVecX8Route(w.gate.typ, sl.buf.All(), xnQ, xnS, hid, ms.ids.Range(0, uint64(4*pairs)), ms.logits.Range(0, uint64(4*p.Experts)),
			ms.wts.Range(0, uint64(4*pairs)), w.upOff, dim, ff, p.Experts, p.Used, ff, p.Gating, p.NormWeights, p.WeightsScale)
		s.Barrier()
		r.captureRouting(s, m)
		stamp("ffn_up")
	} else if x8GateUp {
		sl := w.gate.slices[0]
		s.MoEMatVecX8(w.gate.typ, sl.buf.All(), xnQ, xnS, hid, ms.ids.All(), w.upOff, dim, ff, 0, w.gate.count, p.Used, pairs, false, ff)
		s.Barrier()
		stamp("ffn_up")
	} else if m == 1 && w.upOff != 0 {
		// a decode step: gate, up and SwiGLU in one dispatch over the shared buffer
		if !early && mode != actNone {
			s.QuantizeActivations(w.gate.typ, xn, r.xq.Range(0, uint64(4*dim)), dim, 1, dim)
			s.Barrier()
			expertIn = r.xq.Range(0, uint64(4*dim))
		}
		sl := w.gate.slices[0]
		s.MoEMatVecSwiGLU(w.gate.typ, sl.buf.All(), expertIn, hid, ms.ids.All(), w.upOff, dim, ff, 0, w.gate.count, p.Used, pairs, dim, ff)
		s.Barrier()
		stamp("ffn_up")
	} else {
		r.projectExperts(s, expertIn, dim, m, tilePairs, false, early || upAsIs, expertProjection{w.gate, r.gate, ff}, expertProjection{w.up, r.up, ff})
		s.Barrier()
		stamp("ffn_up")
		s.SwiGLU(hid, r.up.Range(0, uint64(4*pairs*ff)), hid, pairs*ff)
		s.Barrier()
		stamp("swiglu")
	}
	if x8Down {
		s.QuantizeX8(hid, hidQ, hidS, ff, pairs, X8Input{Q8K: x8Q8K(w.down.typ)})
		s.Barrier()
		if fold {
			sh, g := ms.out, ms.wts // not read without a shared expert
			if w.shared != nil {
				sh, g = ms.shared, ms.gateLogit
			}
			r.moeDownX8(s, w, hidQ, hidS, sh.All(), g.All())
			s.Barrier()
			stamp("ffn_down")
			return
		}
		for _, sl := range w.down.slices {
			s.MoEMatVecX8(w.down.typ, sl.binding(), hidQ, hidS, ms.out.All(), ms.ids.All(), 0, ff, dim, sl.e0, sl.ne, p.Used, pairs, true, dim)
		}
	} else {
		r.projectExperts(s, hid, ff, m, tilePairs, true, r.expertsAsIs(w.down.typ, ff, m), expertProjection{w.down, ms.out, dim})
	}
	s.Barrier()
	sh, g := ms.out, ms.wts // not read without a shared expert
	if w.shared != nil {
		r.sharedExpert(s, w.shared, xn, m)
		s.Barrier()
		sh, g = ms.shared, ms.gateLogit
	}
	s.MoECombine(r.x.Range(0, uint64(4*m*dim)), ms.out.Range(0, uint64(4*pairs*dim)), ms.wts.Range(0, uint64(4*pairs)),
		sh.All(), g.All(), dim, p.Used, m, w.shared != nil)
	s.Barrier()
	stamp("ffn_down")
}

// moeDownX8 records a decode step's down products and combine into r.x (MoEDownX8), sh and g
// the shared expert's output and gate logit where the layer has one.
func (r *Resident) moeDownX8(s *Seq, w *moeWeights, hidQ, hidS, sh, g Binding) {
	h, ms := r.h, &r.moe
	s.MoEDownX8(w.down.typ, w.down.slices[0].binding(), hidQ, hidS, r.x.Range(0, uint64(4*h.Dim)), ms.ids.All(), ms.wts.All(),
		sh, g, h.MoE.FFN, h.Dim, h.MoE.Used, w.shared != nil)
}

// sharedTakesX8 reports whether a decode step's shared expert takes the int8 products from a
// rounding of the normed row made beside the routed experts' (sharedGateUpX8,
// moeDecodeWithSharedX8): its gate and up of types that round alike with room for both in
// r.up, its down with room for its input's rounding, and the router and its gate f32, so that
// no product of theirs rounds into r.xq (VKLLM_GPU_SHARED_X8).
func (r *Resident) sharedTakesX8(w *moeWeights) bool {
	sh := w.shared
	if sh == nil || !r.c.sharedX8 || w.router.typ != quant.F32 || sh.gating.typ != quant.F32 {
		return false
	}
	dim, sf := r.h.Dim, r.h.MoE.SharedFFN
	if !r.c.usesX8(sh.gate.typ, dim, 1) || !r.c.usesX8(sh.up.typ, dim, 1) || x8Q8K(sh.gate.typ) != x8Q8K(sh.up.typ) ||
		uint64(x8QuantBytes(dim)+x8ScaleBytes(dim)) > r.xq.Size {
		return false
	}
	return uint64(8*sf) <= r.up.Size && r.takesX8(sf, 1, []projection{{sh.down, r.moe.shared, dim, false}})
}

// sharedGateUpX8 records a decode step's shared expert's gate and up products on the int8
// products from xq and xs (the normed row rounded beside the routed experts' rounding) into
// r.up: the gate's rows first, the up's sf floats after them (the routed experts' gate and up
// write r.gate alone, so the two run in stages side by side; sharedTakesX8 checks the room).
func (r *Resident) sharedGateUpX8(s *Seq, w *sharedExpert, xq, xs Binding) {
	dim, sf := r.h.Dim, r.h.MoE.SharedFFN
	for i, wt := range []weight{w.gate, w.up} {
		for _, sl := range wt.slices {
			y := r.up.Range(uint64(4*(i*sf+sl.row0)), uint64(4*sl.rows))
			s.MatVecX8(wt.typ, sl.buf.All(), xq, xs, y, dim, sl.rows, false)
		}
	}
}

// moeDecodeWithSharedX8 records the rest of a decode step's mixture-of-experts block with a
// shared expert on the int8 products (sharedTakesX8), after the route and the shared expert's
// gate and up (sharedGateUpX8), in three stages:
//
//	the routed experts' gate, up and SwiGLU (MoEMatVecX8 into r.gate) | the shared SwiGLU
//	    rounded for its down product (quantize_x8 with Up, into the start of r.xq)
//	the routed SwiGLU's rounding (hidQ, hidS) | the shared down product into r.moe.shared
//	the routed down products adding Σ w·o + sigmoid(g)·shared to x (moe_down_x8)
func (r *Resident) moeDecodeWithSharedX8(s *Seq, w *moeWeights, xnQ, xnS, hidQ, hidS Binding) {
	h, ms, sh := r.h, &r.moe, w.shared
	p := h.MoE
	dim, ff, sf, pairs := h.Dim, p.FFN, p.SharedFFN, p.Used
	stamp := r.stamper(s)
	hid := r.gate.Range(0, uint64(4*pairs*ff))
	sl := w.gate.slices[0]
	s.MoEMatVecX8(w.gate.typ, sl.buf.All(), xnQ, xnS, hid, ms.ids.All(), w.upOff, dim, ff, 0, w.gate.count, p.Used, pairs, false, ff)
	qb, sb := uint64(x8QuantBytes(sf)), uint64(x8ScaleBytes(sf))
	shQ, shS := r.xq.Range(0, qb), r.xq.Range(qb, sb)
	up := r.up.Range(uint64(4*sf), uint64(4*sf))
	s.QuantizeX8(r.up.Range(0, uint64(4*sf)), shQ, shS, sf, 1, X8Input{Up: &up, Q8K: x8Q8K(sh.down.typ)})
	s.Barrier()
	stamp("ffn_up")
	s.QuantizeX8(hid, hidQ, hidS, ff, pairs, X8Input{Q8K: x8Q8K(w.down.typ)})
	for _, dl := range sh.down.slices {
		s.MatVecX8(sh.down.typ, dl.buf.All(), shQ, shS, dl.out(ms.shared, 0, 1, dim), sf, dl.rows, false)
	}
	s.Barrier()
	r.moeDownX8(s, w, hidQ, hidS, ms.shared.All(), ms.gateLogit.All())
	s.Barrier()
	stamp("ffn_down")
}

// sharedExpert records the shared expert's output of m rows of xn into r.moe.shared:
// down_s(silu(gate_s·xn) ⊙ up_s·xn), without a barrier after its last product.
func (r *Resident) sharedExpert(s *Seq, w *sharedExpert, xn Binding, m int) {
	dim, sf := r.h.Dim, r.h.MoE.SharedFFN
	r.project(s, xn, dim, m, projection{w.gate, r.gate, sf, false}, projection{w.up, r.up, sf, false})
	s.Barrier()
	hs := r.gate.Range(0, uint64(4*m*sf))
	s.SwiGLU(hs, r.up.Range(0, uint64(4*m*sf)), hs, m*sf)
	s.Barrier()
	r.project(s, hs, sf, m, projection{w.down, r.moe.shared, dim, false})
}
