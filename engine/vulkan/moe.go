package vulkan

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// The mixture-of-experts kernels. A layer's routing stays on the device: the router's logits
// (an ordinary product) go through MoERoute into expert ids and weights, the expert products
// (MoEMatVec) read each (token, slot) pair's expert id from that buffer, and MoECombine sums
// the pairs' outputs by their weights into the residual. Pairs are token-major: pair
// q = t·used + j is token t's j-th choice.

// moeMaxExperts is the most experts moe_route holds in shared memory; moeMaxUsed the most it
// selects per token.
const (
	moeMaxExperts = 512
	moeMaxUsed    = 64
)

// MoERoute records the routing of m tokens: from logits (m rows of experts floats) it writes
// each token's used expert ids (uint32) to ids and their weights to wts (m·used each, best
// first), following the gating, the renormalisation (norm) and the scale as engine/cpu's route
// does.
func (s *Seq) MoERoute(logits, ids, wts Binding, experts, used, m int, gating model.Gating, norm bool, scale float32) {
	if err := s.c.checkRouting(experts, used, gating); err != nil || m <= 0 {
		s.fail(fmt.Errorf("moe route for %d tokens: %w", m, cmp.Or(err, errors.New("no token"))))
		return
	}
	kern := s.kernel(s.c.routeKernel("moe_route", experts), 3, 24)
	if kern == nil {
		return
	}
	if scale == 0 {
		scale = 1
	}
	gx, gy := grid1D(m)
	s.Dispatch(kern, Push(uint32(experts), uint32(used), uint32(m), uint32(gating), norm, scale), gx, gy, 1, logits, ids, wts)
}

// RouterRouteF32 records a decode step's router and its routing in one dispatch
// (router_route_f32): logits = W·RMSNorm(x)·g as MatVecNormF32 computes them (w: experts f32
// rows of k, a multiple of 4; g the norm's weight), then the token's used expert ids and
// weights into ids and wts as MoERoute chooses them, by the workgroup that finishes last.
// arrivals is a 4-byte count of finished workgroups, 0 before and left 0.
func (s *Seq) RouterRouteF32(w, x, g, logits, ids, wts, arrivals Binding, k, experts, used int, eps float32, gating model.Gating, norm bool, scale float32) {
	if err := s.c.checkRouting(experts, used, gating); err != nil || k <= 0 || k%4 != 0 {
		s.fail(fmt.Errorf("router and route over rows of %d (a positive multiple of 4): %w", k, cmp.Or(err, errors.New("bad row length"))))
		return
	}
	if w.Size < uint64(4*k*experts) || x.Size < uint64(4*k) || g.Size < uint64(4*k) || logits.Size < uint64(4*experts) ||
		ids.Size < uint64(4*used) || wts.Size < uint64(4*used) || arrivals.Size < 4 {
		s.fail(fmt.Errorf("router and route: %d rows of %d, %d used: a binding is too small", experts, k, used))
		return
	}
	kern := s.kernel(s.c.routeKernel("router_route_f32", experts), 7, 28)
	if kern == nil {
		return
	}
	if scale == 0 {
		scale = 1
	}
	rows := s.c.subgroupsPerWorkgroup() // a row per subgroup, as matvec_norm_f32
	s.Dispatch(kern, Push(uint32(k), uint32(experts), eps, uint32(used), uint32(gating), norm, scale), uint32((experts+rows-1)/rows), 1, 1,
		w, x, g, logits, ids, wts, arrivals)
}

// routeSlotsPerLane is the experts a lane of the _1sg4 routes holds (their ROUTE_SG_PER).
const routeSlotsPerLane = 4

// routeKernel names the variant of a routing kernel (moe_route, router_route_f32) this context
// takes for a router of experts: under VKLLM_GPU_ROUTE_SUBGROUP (on by default), _1sg4 where
// the first subgroup's lanes hold every expert four a lane, so that it alone chooses with no
// barrier between choices (H100, 30B-A3B Q4_K tg128 +3.3%); else the kernel itself, whose
// workgroup chooses with a barrier a choice. (A 16-slot form for up to 16 experts a lane was
// slower at 128 and at 256 experts, its registers in every thread: docs/PERF.md, sessions 27-28.)
func (c *Context) routeKernel(name string, experts int) string {
	if c.routeSubgroup && experts <= routeSlotsPerLane*c.Info.SubgroupSize {
		return name + "_1sg4"
	}
	return name
}

// checkRouting reports why moe_route's choice (moe_route.glsl) cannot route used of experts
// with gating on this device, nil when it can.
func (c *Context) checkRouting(experts, used int, gating model.Gating) error {
	switch {
	case experts <= 0 || experts > moeMaxExperts || used <= 0 || used > min(experts, moeMaxUsed):
		return fmt.Errorf("%d of %d experts: at most %d experts and %d used", used, experts, moeMaxExperts, moeMaxUsed)
	case gating < model.GatingSoftmax || gating > model.GatingSoftmaxSelected:
		return fmt.Errorf("gating %v has no kernel", gating)
	case !c.Info.Features[FeatureSubgroupArith]:
		return fmt.Errorf("device %q has no subgroup arithmetic in compute shaders, which the router's reductions use", c.Info.Name)
	}
	return nil
}

// moeExpertRows is the rows one group of moe_matvec's lanes takes (the shader's NR).
const moeExpertRows = 4

// moeLanes is the threads per row group of moe_matvec for k-element rows: the fewest of 16, 32
// and 64 that cover the row's 32-element units (a 768-wide down product's 24 units take 32,
// two groups to a workgroup, instead of leaving 40 of 64 threads idle).
func moeLanes(k int) int {
	units := k / 32
	switch {
	case units <= 16:
		return 16
	case units <= 32:
		return 32
	}
	return 64
}

// MoEMatVec records the expert products of pairs (token, slot) pairs: Y[q·yStride + r] =
// W_e[r]·X[xrow] for the n rows of k elements of expert e = ids[q], with xrow = q when
// xPerPair (the down product) else q/used (gate and up: the token's input). w binds experts
// e0..e0+ne-1 of the 3-D tensor of type t; pairs routed to other experts are left alone. X
// must hold the activations rounded for t (QuantizeActivations), as for MatMul.
func (s *Seq) MoEMatVec(t quant.Type, w, x, y, ids Binding, k, n, e0, ne, used, pairs int, xPerPair bool, xStride, yStride int) {
	s.moeMatVec(t, w, x, y, ids, 0, k, n, e0, ne, used, pairs, xPerPair, xStride, yStride)
}

// MoEMatVecSwiGLU records the gate and up products of MoEMatVec and their SwiGLU in one
// dispatch: w binds the gate experts e0..e0+ne-1 and, upOff bytes (a nonzero multiple of 4)
// after them, the up experts of the same shape and type; Y[q·yStride + r] = silu(g)·u, as
// SwiGLU computes it from the two products, for each pair's token input (the gate/up form).
func (s *Seq) MoEMatVecSwiGLU(t quant.Type, w, x, y, ids Binding, upOff uint64, k, n, e0, ne, used, pairs, xStride, yStride int) {
	if upOff == 0 || upOff%4 != 0 || upOff > 1<<32-1 {
		s.fail(fmt.Errorf("moe matvec swiglu %v: up experts at byte %d of the binding (a nonzero multiple of 4 below 4 GiB)", t, upOff))
		return
	}
	s.moeMatVec(t, w, x, y, ids, upOff, k, n, e0, ne, used, pairs, false, xStride, yStride)
}

func (s *Seq) moeMatVec(t quant.Type, w, x, y, ids Binding, upOff uint64, k, n, e0, ne, used, pairs int, xPerPair bool, xStride, yStride int) {
	suf, ok := weightSuffix(t)
	if !ok {
		s.fail(fmt.Errorf("moe matvec: weight type %v has no Vulkan kernel", t))
		return
	}
	if k <= 0 || k%32 != 0 || k%blockElems(t) != 0 || n <= 0 || ne <= 0 || used <= 0 || pairs <= 0 {
		s.fail(fmt.Errorf("moe matvec %v: rows of %d elements (a positive multiple of 32 and of %d), %d rows, %d experts, %d pairs", t, k, blockElems(t), n, ne, pairs))
		return
	}
	if xStride%4 != 0 {
		s.fail(fmt.Errorf("moe matvec %v: input stride %d not a multiple of 4", t, xStride))
		return
	}
	if pairs > maxGroups {
		s.fail(fmt.Errorf("moe matvec %v: %d pairs exceed the %d-workgroup grid", t, pairs, maxGroups))
		return
	}
	kern := s.kernel("moe_matvec_"+suf, 4, 44)
	if kern == nil {
		return
	}
	per := uint32(0)
	if xPerPair {
		per = 1
	}
	lanes := moeLanes(k)
	rows := moeExpertRows * 64 / lanes
	gx, gy := grid1D((n + rows - 1) / rows)
	s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(e0), uint32(ne), uint32(used), per, uint32(xStride), uint32(yStride), gx, uint32(upOff), uint32(lanes)),
		gx, gy, uint32(pairs), w, x, y, ids)
}

// MoECombine records X[t] += Σ_j w[t·used+j]·O[t·used+j] (+ sigmoid(g[t])·S[t] with a shared
// expert) over m rows of dim, in engine/cpu's order. Without a shared expert, sh and g may be
// any bindings (they are not read).
func (s *Seq) MoECombine(x, o, wts, sh, g Binding, dim, used, m int, shared bool) {
	if dim <= 0 || used <= 0 || m <= 0 {
		s.fail(fmt.Errorf("moe combine: %d rows of %d with %d experts each", m, dim, used))
		return
	}
	kern := s.kernel("moe_combine", 5, 16)
	if kern == nil {
		return
	}
	hs := uint32(0)
	if shared {
		hs = 1
	}
	gx, gy := grid1D((dim*m + 63) / 64)
	s.Dispatch(kern, Push(uint32(dim), uint32(used), uint32(m), hs), gx, gy, 1, x, o, wts, sh, g)
}

// moeTilePairs is the most pairs of one expert a grouped product's tile takes (moe_gemm.glsl's
// TM); moeTileRows the rows one group of its lanes takes (NR); moeCoopmatTilePairs the most
// moe_gemm_coopmat.glsl takes (BN), and moeCoopmatTilePairs64 its _p64 variants' (MOE_BN 64).
const (
	moeTilePairs          = 16
	moeTileRows           = 2
	moeCoopmatTilePairs   = 32
	moeCoopmatTilePairs64 = 64
)

// moeTile64MinK is the shortest row a product over a grouping of 64-pair tiles takes the _p64
// kernels for; shorter rows take the 32-pair kernels, a workgroup for each half of a tile.
// H100, 2026-12-07, Qwen3-30B-A3B Q4_K pp512 window: the _p64 kernels took the gate and up
// products (2048-element rows) from 60.2 to 42.6 ms a window but the down products
// (768-element rows) from 19.4 to 22.1: a short row's few K steps do not pay for the larger
// tile's shared memory and accumulators.
const moeTile64MinK = 1024

// moeCoopmatTile is the tile size moeFFN groups with when every expert product of the layer
// runs on moe_gemm_coopmat: 64 pairs under VKLLM_GPU_MOE_TILE64 (the _p64 kernels), else 32.
func (c *Context) moeCoopmatTile() int {
	if c.moeTile64 {
		return moeCoopmatTilePairs64
	}
	return moeCoopmatTilePairs
}

// moeGroupTile is the tile size a prompt window's grouping takes for an expert FFN whose gate
// and up experts (of dim-element rows) and down experts (of ff-element rows) have these types:
// moeCoopmatTile where all three products run on moe_gemm_coopmat, else moe_gemm's moeTilePairs.
func (c *Context) moeGroupTile(gate, up, down quant.Type, dim, ff int) int {
	if c.moeUsesCoopmat(gate, dim) && c.moeUsesCoopmat(up, dim) && c.moeUsesCoopmat(down, ff) {
		return c.moeCoopmatTile()
	}
	return moeTilePairs
}

// moeUsesCoopmat reports whether the grouped expert products of weights of type t and k-element
// rows run on moe_gemm_coopmat (the cooperative-matrix tier, as usesCoopmat decides for dense
// prefill).
func (c *Context) moeUsesCoopmat(t quant.Type, k int) bool {
	return c.usesCoopmat(t, k, 2)
}

// moeMaxTiles bounds the tiles moe_group makes of pairs pairs over experts experts in tiles of
// any size it takes (the smallest, moeTilePairs, make the most): it sizes the tiles buffer.
func moeMaxTiles(pairs, experts int) int {
	return moeTileBound(pairs, experts, moeTilePairs)
}

// moeTileBound bounds the tiles of a grouping of pairs pairs over experts experts in tiles of
// up to tilePairs pairs: every expert's last tile may be partial. A grouped product's grid
// takes this many tiles, so fewer of its workgroups find no tile than under moeMaxTiles.
func moeTileBound(pairs, experts, tilePairs int) int {
	return (pairs+tilePairs-1)/tilePairs + min(experts, pairs)
}

// moeCoopmatKernel names the cooperative-matrix kernel (for weights of type t, suffix suf) that
// takes a grouping of tilePairs-pair tiles (MoEGEMM has checked it positive) over k-element
// rows, the workgroups it gives each tile and the expert rows each workgroup takes:
// tiles of up to 32 pairs take the 32-pair kernels, a workgroup a tile; 64-pair tiles the _p64
// kernels where rows have at least moeTile64MinK elements (moe_gemm_ahead's, 64 rows a
// workgroup, under VKLLM_GPU_MOE_AHEAD where the device's workgroup memory holds them), else the
// 32-pair kernels, a workgroup a half. Larger tiles, or 64-pair ones without
// VKLLM_GPU_MOE_TILE64, are an error: the kernels would drop their pairs past the kernel's tile.
// H100, 2026-12-07, 30B-A3B Q4_K window: moe_gemm_ahead took the gate and up products
// (2048-element rows, 8 chunks) from 42.4 to 37.5 ms but the down products (768, in halves of
// 32 pairs) from 19.9 to 26.8, so the short rows stay on moe_gemm_coopmat.
func (c *Context) moeCoopmatKernel(t quant.Type, suf string, tilePairs, k int) (name string, parts, rows int, err error) {
	switch {
	case tilePairs > moeCoopmatTilePairs64 || tilePairs > moeCoopmatTilePairs && !c.moeTile64:
		return "", 0, 0, fmt.Errorf("tiles of %d pairs (at most %d; %d with VKLLM_GPU_MOE_TILE64)", tilePairs, moeCoopmatTilePairs, moeCoopmatTilePairs64)
	case tilePairs <= moeCoopmatTilePairs:
		return "moe_gemm_coopmat_" + suf, 1, moeCoopmatRows, nil
	case k >= c.moeTile64MinK && c.moeAhead && c.moeAheadFits(t):
		return "moe_gemm_ahead_p64_" + suf, 1, moeAheadRows, nil
	case k >= c.moeTile64MinK:
		return "moe_gemm_coopmat_p64_" + suf, 1, moeCoopmatRows, nil
	default:
		return "moe_gemm_coopmat_" + suf, 2, moeCoopmatRows, nil
	}
}

// moeAheadFits reports whether moe_gemm_ahead has a _p64 kernel for weights of type t and it
// fits the device's workgroup memory (NVIDIA: 48 KiB; the largest declares 40,704 bytes); where
// it does not the products stay on moe_gemm_coopmat.
func (c *Context) moeAheadFits(t quant.Type) bool {
	return moeAheadTypes[t] && moeAheadSharedBytes(t, true) <= c.Info.MaxComputeShared
}

// moeAheadTypes are the weight types moe_gemm_ahead is built for: those its GPU test
// (TestMoEGEMMCoopmatWithinTheCoopmatBound) has run on a device with cooperative matrices
// (H100, 2026-12-07). The kernel reads any type dequant.glsl does; another type's
// moe_gemm_ahead_p64_<type>.comp joins once it has run there.
var moeAheadTypes = map[quant.Type]bool{
	quant.Q4_0: true, quant.Q8_0: true, quant.Q3_K: true, quant.Q4_K: true, quant.Q5_K: true, quant.Q6_K: true,
	quant.IQ4_XS: true, quant.IQ2_XXS: true, quant.MXFP4: true, quant.F16: true,
}

// moeAheadSharedBytes is the workgroup memory moe_gemm_ahead.glsl's _p64 kernel declares for
// weights of type t (with coopmat, its cooperative-matrix form's store fragments): a chunk of
// 64 rows' raw bytes (CH elements: 256, or 128 where eight 32-element blocks exceed 300 bytes),
// the fp16 weight and activation tiles, and an i-quant's codebook (at most 4 KiB).
func moeAheadSharedBytes(t quant.Type, coopmat bool) int {
	const bm, bn, sk4 = moeAheadRows, moeCoopmatTilePairs64, 64/4 + 2
	be, bb := t.BlockSize(), t.BlockBytes()
	ch := 256
	if bb*(256/be) > 300 {
		ch = 128
	}
	raw := ch / be * bb
	rws := ((raw+3)/4 + 2) | 1
	n := bm*rws*4 + bm*sk4*8 + bn*sk4*8
	if coopmat {
		n += 4 * 256 * 4
	}
	if _, iq := iquantSuffix[t]; iq {
		n += 4096
	}
	return n
}

// The expert rows a workgroup of the grouped cooperative-matrix products takes (BM in
// moe_gemm_coopmat.glsl and moe_gemm_ahead.glsl).
const (
	moeCoopmatRows = 128
	moeAheadRows   = 64
)

// MoEGroup records the grouping of pairs (token, slot) pairs by their expert ids (written by
// MoERoute) for MoEGEMM: sorted gets the pairs expert by expert, in order, and tiles the count
// of tiles and each tile's (expert, first index into sorted, pairs), at most moeTilePairs
// pairs a tile. tiles holds 1 + 3·moeMaxTiles(pairs, experts) uint32s, sorted pairs.
func (s *Seq) MoEGroup(ids, tiles, sorted Binding, pairs, experts int) {
	s.MoEGroupTiles(ids, tiles, sorted, pairs, experts, moeTilePairs)
}

// MoEGroupTiles is MoEGroup with tiles of at most tilePairs pairs (moeTilePairs, or
// Context.moeCoopmatTile where every product of the grouping runs on moe_gemm_coopmat). Tiles
// of 64 pairs need the _p64 kernels (VKLLM_GPU_MOE_TILE64): the others would drop pairs past 32.
func (s *Seq) MoEGroupTiles(ids, tiles, sorted Binding, pairs, experts, tilePairs int) {
	if tilePairs != moeTilePairs && tilePairs != moeCoopmatTilePairs && tilePairs != s.c.moeCoopmatTile() {
		s.fail(fmt.Errorf("moe group: tiles of %d pairs (the kernels take %d or %d; %d with VKLLM_GPU_MOE_TILE64)", tilePairs, moeTilePairs, moeCoopmatTilePairs, moeCoopmatTilePairs64))
		return
	}
	if pairs <= 0 || experts <= 0 || experts > moeMaxExperts {
		s.fail(fmt.Errorf("moe group: %d pairs over %d experts (at most %d)", pairs, experts, moeMaxExperts))
		return
	}
	if need := uint64(4 * (1 + 3*moeMaxTiles(pairs, experts))); tiles.Size != 0 && tiles.Size < need {
		s.fail(fmt.Errorf("moe group: tiles binding of %d bytes, need %d", tiles.Size, need))
		return
	}
	kern := s.kernel("moe_group", 3, 12)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(pairs), uint32(experts), uint32(tilePairs)), 1, 1, 1, ids, tiles, sorted)
}

// MoEGEMM records the expert products of MoEMatVec for pairs grouped by MoEGroupTiles: each
// tile's pairs share one read of their expert's rows. The arguments are MoEMatVec's, with the
// grouping (tiles, sorted, its tile size tilePairs) in place of the ids and the experts' count
// bounding the tiles.
func (s *Seq) MoEGEMM(t quant.Type, w, x, y, tiles, sorted Binding, k, n, e0, ne, used, pairs, experts, tilePairs int, xPerPair bool, xStride, yStride int) {
	suf, ok := weightSuffix(t)
	if !ok {
		s.fail(fmt.Errorf("moe gemm: weight type %v has no Vulkan kernel", t))
		return
	}
	if k <= 0 || k%32 != 0 || k%blockElems(t) != 0 || n <= 0 || ne <= 0 || used <= 0 || pairs <= 0 {
		s.fail(fmt.Errorf("moe gemm %v: rows of %d elements (a positive multiple of 32 and of %d), %d rows, %d experts, %d pairs", t, k, blockElems(t), n, ne, pairs))
		return
	}
	if xStride%4 != 0 {
		s.fail(fmt.Errorf("moe gemm %v: input stride %d not a multiple of 4", t, xStride))
		return
	}
	if tilePairs <= 0 {
		s.fail(fmt.Errorf("moe gemm %v: a grouping in tiles of %d pairs", t, tilePairs))
		return
	}
	maxTiles := moeTileBound(pairs, experts, tilePairs)
	if maxTiles > maxGroups {
		s.fail(fmt.Errorf("moe gemm %v: %d tiles exceed the %d-workgroup grid", t, maxTiles, maxGroups))
		return
	}
	per := uint32(0)
	if xPerPair {
		per = 1
	}
	if s.c.moeUsesCoopmat(t, k) {
		name, parts, bm, err := s.c.moeCoopmatKernel(t, suf, tilePairs, k)
		if err != nil {
			s.fail(fmt.Errorf("moe gemm %v: %w", t, err))
			return
		}
		if parts*maxTiles > maxGroups {
			s.fail(fmt.Errorf("moe gemm %v: %d tiles in %d parts exceed the %d-workgroup grid", t, maxTiles, parts, maxGroups))
			return
		}
		kern := s.kernel(name, 5, 36)
		if kern == nil {
			return
		}
		s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(e0), uint32(ne), uint32(used), per, uint32(xStride), uint32(yStride), uint32(parts)),
			uint32((n+bm-1)/bm), 1, uint32(parts*maxTiles), w, x, y, tiles, sorted)
		return
	}
	if tilePairs > moeTilePairs {
		s.fail(fmt.Errorf("moe gemm %v: tiles of %d pairs, moe_gemm takes at most %d (the grouping's tiles are for the cooperative-matrix kernels, which %d-element rows of %v do not take)", t, tilePairs, moeTilePairs, k, t))
		return
	}
	kern := s.kernel("moe_gemm_"+suf, 5, 40)
	if kern == nil {
		return
	}
	lanes := moeLanes(k)
	rows := moeTileRows * 64 / lanes
	gx, gy := grid1D((n + rows - 1) / rows)
	s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(e0), uint32(ne), uint32(used), per, uint32(xStride), uint32(yStride), gx, uint32(lanes)),
		gx, gy, uint32(maxTiles), w, x, y, tiles, sorted)
}
