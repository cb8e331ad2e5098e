package vulkan

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/shaders"
)

// TestMoEGroupOrdersPairsByExpert checks moe_group's grouping against the host's: every pair of
// expert 0 in increasing order, then expert 1's, ...; pairs whose id is past the experts left
// out; the tiles each expert's pairs cut into, in order. The shapes take both of the kernel's
// paths: the shared-memory sort (up to 4096 pairs: a prefill window of 512 tokens over 8 slots)
// and the per-expert gather past it, with skewed choices (one expert taking a third of the
// pairs, many experts never chosen).
func TestMoEGroupOrdersPairsByExpert(t *testing.T) {
	c := ctxOrSkip(t)
	cases := []struct {
		name                   string
		pairs, experts, tile   int
		skewed, pastTheExperts bool
	}{
		{name: "one pair", pairs: 1, experts: 4, tile: moeTilePairs},
		{name: "69 pairs over 5", pairs: 69, experts: 5, tile: moeTilePairs, skewed: true},
		{name: "a 30B-A3B window", pairs: 512 * 8, experts: 128, tile: moeCoopmatTilePairs, skewed: true},
		{name: "the seed's window", pairs: 512 * 8, experts: 256, tile: moeTilePairs},
		{name: "512 experts, ids past them", pairs: 3000, experts: 512, tile: moeCoopmatTilePairs, pastTheExperts: true},
		{name: "past the sort", pairs: 4097, experts: 128, tile: moeTilePairs, skewed: true},
		{name: "past the sort, ids past the experts", pairs: 6000, experts: 60, tile: moeCoopmatTilePairs, pastTheExperts: true},
		{name: "a 30B-A3B window in 64-pair tiles", pairs: 512 * 8, experts: 128, tile: moeCoopmatTilePairs64, skewed: true},
		{name: "past the sort in 64-pair tiles", pairs: 6000, experts: 60, tile: moeCoopmatTilePairs64, pastTheExperts: true},
	}
	defer func(on bool) { c.moeTile64 = on }(c.moeTile64)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.moeTile64 = tc.tile == moeCoopmatTilePairs64 // the only switch under which 64-pair tiles are taken
			rng := rand.New(rand.NewSource(int64(i) + 1))
			ids := make([]uint32, tc.pairs)
			for q := range ids {
				ids[q] = uint32(rng.Intn(tc.experts))
				if tc.skewed && q%3 == 0 {
					ids[q] = uint32(tc.experts - 1)
				}
				if tc.pastTheExperts && q%7 == 3 {
					ids[q] = uint32(tc.experts + rng.Intn(5))
				}
			}
			var sorted, tiles []uint32
			for e := 0; e < tc.experts; e++ {
				first := len(sorted)
				for q, id := range ids {
					if int(id) == e {
						sorted = append(sorted, uint32(q))
					}
				}
				for s := first; s < len(sorted); s += tc.tile {
					tiles = append(tiles, uint32(e), uint32(s), uint32(min(tc.tile, len(sorted)-s)))
				}
			}
			want := append([]uint32{uint32(len(tiles) / 3)}, tiles...)

			poison := make([]uint32, max(1+3*moeMaxTiles(tc.pairs, tc.experts), tc.pairs))
			for j := range poison {
				poison[j] = 0xDEADBEEF
			}
			ib := uploadU32(t, c, ids)
			tb := uploadU32(t, c, poison[:1+3*moeMaxTiles(tc.pairs, tc.experts)])
			sb := uploadU32(t, c, poison[:tc.pairs])
			run(t, c, func(s *Seq) { s.MoEGroupTiles(ib.All(), tb.All(), sb.All(), tc.pairs, tc.experts, tc.tile) })
			gotSorted, err := sb.ReadU32(0, len(sorted))
			if err != nil {
				t.Fatal(err)
			}
			gotTiles, err := tb.ReadU32(0, len(want))
			if err != nil {
				t.Fatal(err)
			}
			if j := firstDifference(gotSorted, sorted); j >= 0 {
				t.Fatalf("sorted[%d] = %d, want %d (pair of expert %d)", j, gotSorted[j], sorted[j], ids[sorted[j]])
			}
			if j := firstDifference(gotTiles, want); j >= 0 {
				t.Fatalf("tiles word %d = %d, want %d (%d tiles wanted)", j, gotTiles[j], want[j], want[0])
			}
			// The grouped products' grid takes moeTileBound tiles: a grouping past it would
			// lose its last tiles.
			if bound := moeTileBound(tc.pairs, tc.experts, tc.tile); int(gotTiles[0]) > bound {
				t.Fatalf("%d tiles of %d pairs, past the products' bound of %d", gotTiles[0], tc.tile, bound)
			}
		})
	}
}

// firstDifference is the first index where got and want differ, or -1 where they are equal.
func firstDifference(got, want []uint32) int {
	if slices.Equal(got, want) {
		return -1
	}
	for j := range min(len(got), len(want)) {
		if got[j] != want[j] {
			return j
		}
	}
	return min(len(got), len(want))
}

// Tiles of 64 pairs are refused unless VKLLM_GPU_MOE_TILE64 names the _p64 kernels: the 32-pair
// kernels would drop every pair of a tile past its 32nd.
func TestMoEGroupRefuses64PairTilesWithoutTheirKernels(t *testing.T) {
	c := ctxOrSkip(t)
	defer func(on bool) { c.moeTile64 = on }(c.moeTile64)
	const pairs, experts = 64, 2
	for _, on := range []bool{false, true} {
		c.moeTile64 = on
		ib := uploadU32(t, c, make([]uint32, pairs))
		tb := uploadU32(t, c, make([]uint32, 1+3*moeMaxTiles(pairs, experts)))
		sb := uploadU32(t, c, make([]uint32, pairs))
		s, err := c.NewSeq()
		if err != nil {
			t.Fatal(err)
		}
		s.MoEGroupTiles(ib.All(), tb.All(), sb.All(), pairs, experts, moeCoopmatTilePairs64)
		err = s.Run()
		s.Free()
		if on && err != nil {
			t.Fatalf("with the switch on: %v", err)
		}
		if !on && (err == nil || !strings.Contains(err.Error(), "VKLLM_GPU_MOE_TILE64")) {
			t.Fatalf("with the switch off: got %v, want a refusal naming VKLLM_GPU_MOE_TILE64", err)
		}
	}
}

// VKLLM_GPU_MOE_TILE64 reaches the context: on by default (64-pair tiles), off with 0 (32);
// VKLLM_GPU_MOE_P64_MIN_K sets the shortest rows the _p64 kernels take; VKLLM_GPU_MOE_AHEAD
// (moe_gemm_ahead for them) is on by default, off with 0.
func TestMoETile64SwitchSetsTheGroupingTile(t *testing.T) {
	c := ctxOrSkip(t)
	t.Cleanup(c.selectNumericTier) // the environment's choice back, after Setenv's own cleanups (LIFO)
	for _, tc := range []struct {
		env, minKEnv, aheadEnv string
		tile, minK             int
		ahead                  bool
	}{
		{"", "", "", moeCoopmatTilePairs64, moeTile64MinK, true},
		{"0", "", "0", moeCoopmatTilePairs, moeTile64MinK, false},
		{"1", "", "1", moeCoopmatTilePairs64, moeTile64MinK, true},
		{"1", "4096", "", moeCoopmatTilePairs64, 4096, true},
	} {
		t.Setenv("VKLLM_GPU_MOE_TILE64", tc.env)
		t.Setenv("VKLLM_GPU_MOE_P64_MIN_K", tc.minKEnv)
		t.Setenv("VKLLM_GPU_MOE_AHEAD", tc.aheadEnv)
		c.selectNumericTier()
		if c.moeAhead != tc.ahead {
			t.Errorf("VKLLM_GPU_MOE_AHEAD=%q: moe_gemm_ahead %v, want %v", tc.aheadEnv, c.moeAhead, tc.ahead)
		}
		if got := c.moeCoopmatTile(); got != tc.tile {
			t.Errorf("VKLLM_GPU_MOE_TILE64=%q: tiles of %d pairs, want %d", tc.env, got, tc.tile)
		}
		if c.moeTile64MinK != tc.minK {
			t.Errorf("VKLLM_GPU_MOE_P64_MIN_K=%q: the _p64 kernels from rows of %d, want %d", tc.minKEnv, c.moeTile64MinK, tc.minK)
		}
	}
}

// The grouped products refuse a grouping whose tiles their kernel would cut short: moe_gemm
// (the products off the cooperative-matrix tier: f32 weights everywhere) takes tiles of 16
// pairs, and a 32-pair grouping is refused with a message naming the limit.
func TestMoEGEMMRefusesTilesLargerThanItsKernelTakes(t *testing.T) {
	c := ctxOrSkip(t)
	const k, n, ne, used, m = 64, 8, 2, 2, 20
	pairs := m * used
	w := upload(t, c, make([]float32, ne*n*k))
	x, y := upload(t, c, make([]float32, m*k)), upload(t, c, make([]float32, pairs*n))
	tb := uploadU32(t, c, make([]uint32, 1+3*moeMaxTiles(pairs, ne)))
	sb := uploadU32(t, c, make([]uint32, pairs))
	for _, tc := range []struct {
		tilePairs int
		refused   bool
	}{{moeTilePairs, false}, {moeCoopmatTilePairs, true}} {
		s, err := c.NewSeq()
		if err != nil {
			t.Fatal(err)
		}
		s.MoEGEMM(quant.F32, w.All(), x.All(), y.All(), tb.All(), sb.All(), k, n, 0, ne, used, pairs, ne, tc.tilePairs, false, k, n)
		err = s.Run()
		s.Free()
		if tc.refused != (err != nil) || tc.refused && !strings.Contains(err.Error(), "at most 16") {
			t.Errorf("tiles of %d pairs: got %v, refused %v", tc.tilePairs, err, tc.refused)
		}
	}
}

// moeCoopmatKernel's choice, on the context's fields alone (so it runs without cooperative
// matrices): 16- and 32-pair tiles take the 32-pair kernels, a workgroup a tile; 64-pair
// tiles the _p64 kernels from rows of moeTile64MinK elements, the 32-pair kernels in halves
// below; 64-pair tiles without the switch, and larger ones, are refused. Under
// VKLLM_GPU_MOE_AHEAD the _p64 choice names moe_gemm_ahead's kernel, of 64 rows a workgroup.
func TestMoECoopmatKernelForTheGrouping(t *testing.T) {
	for _, ahead := range []bool{false, true} {
		c := &Context{moeTile64MinK: 1024, moeAhead: ahead, Info: DeviceInfo{MaxComputeShared: 48 << 10}}
		p64, p64Rows := "moe_gemm_coopmat_p64_q4_k", 128
		if ahead {
			p64, p64Rows = "moe_gemm_ahead_p64_q4_k", 64
		}
		for _, tc := range []struct {
			tile64          bool
			tilePairs, k    int
			name            string
			parts, rows     int
			refusedForTiles bool
		}{
			{false, moeTilePairs, 2048, "moe_gemm_coopmat_q4_k", 1, 128, false},
			{false, moeCoopmatTilePairs, 2048, "moe_gemm_coopmat_q4_k", 1, 128, false},
			{false, moeCoopmatTilePairs64, 2048, "", 0, 0, true},
			{true, moeTilePairs, 2048, "moe_gemm_coopmat_q4_k", 1, 128, false},
			{true, moeCoopmatTilePairs, 768, "moe_gemm_coopmat_q4_k", 1, 128, false},
			{true, moeCoopmatTilePairs64, 2048, p64, 1, p64Rows, false},
			{true, moeCoopmatTilePairs64, 1024, p64, 1, p64Rows, false},
			{true, moeCoopmatTilePairs64, 768, "moe_gemm_coopmat_q4_k", 2, 128, false},
			{true, 2 * moeCoopmatTilePairs64, 2048, "", 0, 0, true},
		} {
			c.moeTile64 = tc.tile64
			name, parts, bm, err := c.moeCoopmatKernel(quant.Q4_K, "q4_k", tc.tilePairs, tc.k)
			if tc.refusedForTiles {
				if err == nil || !strings.Contains(err.Error(), "VKLLM_GPU_MOE_TILE64") {
					t.Errorf("ahead %v, switch %v, %d-pair tiles: got %s in %d parts, %v; want a refusal naming the switch", ahead, tc.tile64, tc.tilePairs, name, parts, err)
				}
				continue
			}
			if err != nil || name != tc.name || parts != tc.parts || bm != tc.rows {
				t.Errorf("ahead %v, switch %v, %d-pair tiles, %d-element rows: got %s in %d parts of %d rows (%v), want %s in %d of %d",
					ahead, tc.tile64, tc.tilePairs, tc.k, name, parts, bm, err, tc.name, tc.parts, tc.rows)
			}
		}
	}
	// Where the device's workgroup memory is too small for an ahead kernel (Q8_0's _p64 declares
	// 40704 bytes; the Q4_K one 32000), or the type has none, the product stays on
	// moe_gemm_coopmat.
	c := &Context{moeTile64: true, moeTile64MinK: 1024, moeAhead: true, Info: DeviceInfo{MaxComputeShared: 32 << 10}}
	for _, tc := range []struct {
		typ  quant.Type
		suf  string
		name string
		rows int
	}{
		{quant.Q8_0, "q8_0", "moe_gemm_coopmat_p64_q8_0", 128},
		{quant.Q4_K, "q4_k", "moe_gemm_ahead_p64_q4_k", 64},
		{quant.IQ3_XXS, "iq3_xxs", "moe_gemm_coopmat_p64_iq3_xxs", 128}, // no ahead kernel built
	} {
		if name, _, bm, err := c.moeCoopmatKernel(tc.typ, tc.suf, moeCoopmatTilePairs64, 2048); err != nil || name != tc.name || bm != tc.rows {
			t.Errorf("32 KiB of workgroup memory, %v: got %s of %d rows (%v), want %s of %d", tc.typ, name, bm, err, tc.name, tc.rows)
		}
	}
}

// The embedded moe_gemm_ahead _p64 kernels are exactly moeAheadTypes' (and their _plain test
// forms are not among them): a type the choice would send there has its kernel, and no kernel
// is built that the choice never takes.
func TestMoEAheadKernelsAreTheTestedTypes(t *testing.T) {
	names, err := shaders.Names()
	if err != nil {
		t.Fatal(err)
	}
	built := map[string]bool{}
	for _, n := range names {
		if suf, ok := strings.CutPrefix(n, "moe_gemm_ahead_p64_"); ok {
			built[suf] = true
		}
	}
	want := map[string]bool{}
	for typ := range moeAheadTypes {
		suf, ok := weightSuffix(typ)
		if !ok {
			t.Fatalf("%v: no kernel suffix", typ)
		}
		want[suf] = true
		if !built[suf] {
			t.Errorf("%v is in moeAheadTypes but moe_gemm_ahead_p64_%s is not embedded", typ, suf)
		}
	}
	for suf := range built {
		if !want[suf] {
			t.Errorf("moe_gemm_ahead_p64_%s is embedded but its type is not in moeAheadTypes", suf)
		}
	}
}
