package plan

import (
	"fmt"
	"strings"
	"testing"
)

// dense8B is a dense 32-layer model with 8 KV heads of 128 (f16 KV: 128 KiB per position, one
// side 64 KiB), the shape of Llama-3-8B.
func dense8B() Model {
	return Model{Name: "dense-8b", Arch: "llama", Layers: 32, Embd: 4096, FF: 14336, Heads: 32, HeadsKV: 8,
		HeadDimK: 128, HeadDimV: 128, Vocab: 128256, CtxLength: 131072}
}

// seedModel is the seed's case: a 7B shape (32 layers, 8x128 KV, vocab 32000, scratch 348.5 MiB)
// carrying 11167 MiB of weights.
func seedModel() Model {
	return Model{Name: "seed", Arch: "llama", Layers: 32, Embd: 4096, FF: 14336, Heads: 32, HeadsKV: 8,
		HeadDimK: 128, HeadDimV: 128, Vocab: 32000, CtxLength: 32768}
}

// uploads builds an upload list of layers × perLayer bytes (split over attn and ffn), plus an
// embedding table and an output head (no head when head is 0: tied embeddings) and a final norm
// of 256 bytes when withNorm.
func uploads(t *testing.T, layers int, perLayer, embd, head int64) []Upload {
	t.Helper()
	var specs []TensorSpec
	specs = append(specs, TensorSpec{Name: "token_embd.weight", Type: "Q8_0", Size: embd})
	for i := 0; i < layers; i++ {
		attn := perLayer / 4 / UploadAlign * UploadAlign
		specs = append(specs,
			TensorSpec{Name: blk(i, "attn_q.weight"), Type: "Q8_0", Size: attn},
			TensorSpec{Name: blk(i, "ffn_up.weight"), Type: "Q8_0", Size: perLayer - attn})
	}
	if head > 0 {
		specs = append(specs, TensorSpec{Name: "output.weight", Type: "Q8_0", Size: head})
	}
	ups, err := UploadList(specs)
	if err != nil {
		t.Fatalf("UploadList: %v", err)
	}
	return ups
}

func blk(i int, rest string) string { return "blk." + itoa(i) + "." + rest }

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// seedInput is the seed's model on a 16303 MiB heap with nothing reporting.
func seedInput(t *testing.T, wddm bool) Input {
	m := seedModel()
	return Input{
		Model:   m,
		Uploads: uploads(t, 32, 340*MiB, 125*MiB, 162*MiB), // 11167 MiB
		KV:      KVFor(m),
		Scratch: ScratchFor(m),
		Device:  Device{Name: "seed GPU", HeapBytes: 16303 * MiB, WDDM: wddm, MaxStorageBufferRange: 4*GiB - 1},
		Ctx:     CtxRequest{Requested: 39584},
	}
}

func TestPlanHeadroom(t *testing.T) {
	tests := []struct {
		name string
		cap  int64
		wddm bool
		want int64
	}{
		{"WDDM keeps 27% of a 16 GiB cap", 16 * GiB, true, 16 * GiB * 27 / 100},
		{"WDDM 2 GiB floor wins on a 4 GiB cap", 4 * GiB, true, 2 * GiB},
		{"WDDM share just above the floor wins on an 8 GiB cap", 8 * GiB, true, 8 * GiB * 27 / 100},
		{"off WDDM keeps the 2 GiB floor on a 16 GiB cap", 16 * GiB, false, 2 * GiB},
		{"off WDDM keeps the 2 GiB floor on a 64 GiB cap", 64 * GiB, false, 2 * GiB},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := PlanHeadroom(tc.cap, tc.wddm); got != tc.want {
				t.Fatalf("PlanHeadroom(%d, %v) = %d, want %d", tc.cap, tc.wddm, got, tc.want)
			}
		})
	}
	if got := MBUp(PlanHeadroom(16*GiB, true)); got != 4424 {
		t.Fatalf("27%% of 16 GiB prints as %d MB, want 4424 (rounded up)", got)
	}
}

func TestWDDMWithoutBudgetKeepsTwentySevenPercentOfTheCap(t *testing.T) {
	in := seedInput(t, true)
	in.Device.HeapBytes = 16*GiB + DesktopReserve // cap 16 GiB
	p := Compute(in)
	if p.Headroom.Rule != RuleWDDMShare || p.Headroom.Bytes != 16*GiB*27/100 {
		t.Fatalf("headroom = %+v, want 27%% of 16 GiB", p.Headroom)
	}
	if got := MBDown(p.UsableBytes); got != 16384-4424 {
		t.Fatalf("usable = %d MB, want %d", got, 16384-4424)
	}
	in.Device.WDDM = false // negative control: the same card off WDDM keeps only the floor
	if p := Compute(in); p.Headroom.Bytes != HeadroomFloor || p.Headroom.Rule != RuleFloor {
		t.Fatalf("off WDDM headroom = %+v, want the 2 GiB floor", p.Headroom)
	}
}

func TestLinuxWithoutBudgetKeepsTwoGiBFloor(t *testing.T) {
	in := seedInput(t, false)
	in.Device.HeapBytes = 8 * GiB
	p := Compute(in)
	if p.Source != SourceHeap || p.Headroom.Bytes != 2*GiB || p.CapBytes != 6*GiB || p.UsableBytes != 4*GiB {
		t.Fatalf("source %s cap %d headroom %d usable %d, want heap, 6 GiB, 2 GiB, 4 GiB", p.Source, p.CapBytes, p.Headroom.Bytes, p.UsableBytes)
	}
}

func TestPinnedUsableIsThePinWithNoHeadroom(t *testing.T) {
	in := seedInput(t, true)
	in.Device.BudgetReported, in.Device.BudgetBytes, in.Device.UsageBytes = true, 4*GiB, 3*GiB
	in.Pin = Pin{MB: 8000, Source: PinEnv}
	p := Compute(in)
	if p.Source != SourcePin || p.UsableBytes != 8000*MiB || p.CapBytes != 8000*MiB || p.Headroom.Bytes != 0 || p.MarginBytes != 0 {
		t.Fatalf("source %s usable %d cap %d headroom %d margin %d, want pin 8000 MiB, no headroom, no room query",
			p.Source, p.UsableBytes, p.CapBytes, p.Headroom.Bytes, p.MarginBytes)
	}
	in.Pin = Pin{} // negative control: unpinned, the reported room governs
	if p := Compute(in); p.Source != SourceBudget || p.UsableBytes != 512*MiB {
		t.Fatalf("unpinned: source %s usable %d, want budget with 4096-3072-512 = 512 MiB", p.Source, p.UsableBytes)
	}
}

func TestBudgetMargin(t *testing.T) {
	tests := []struct {
		name   string
		budget int64
		want   int64
	}{
		{"small budget keeps 512 MiB", 4 * GiB, 512 * MiB},
		{"16 GiB budget keeps a sixteenth", 16 * GiB, 1 * GiB},
		{"24 GiB budget keeps a sixteenth", 24 * GiB, 1536 * MiB},
		{"large budget stops at the 2 GiB floor", 80 * GiB, 2 * GiB},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := BudgetMargin(tc.budget); got != tc.want {
				t.Fatalf("BudgetMargin(%d) = %d, want %d", tc.budget, got, tc.want)
			}
		})
	}
}

func TestReportedBudgetUsesBudgetMinusUsageMinusMargin(t *testing.T) {
	tests := []struct {
		name                string
		heap, budget, usage int64
		want                int64
	}{
		{"room below the cap governs", 24 * GiB, 20 * GiB, 3 * GiB, 20*GiB - 3*GiB - 1280*MiB},
		{"cap below the room governs", 8 * GiB, 16 * GiB, 0, 6 * GiB},
		{"usage past the budget leaves nothing", 8 * GiB, 6 * GiB, 7 * GiB, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := seedInput(t, true)
			in.Device.HeapBytes, in.Device.BudgetReported, in.Device.BudgetBytes, in.Device.UsageBytes = tc.heap, true, tc.budget, tc.usage
			p := Compute(in)
			if p.UsableBytes != tc.want || p.Headroom.Bytes != 0 || p.Source != SourceBudget {
				t.Fatalf("usable %d headroom %d source %s, want usable %d, headroom 0, budget", p.UsableBytes, p.Headroom.Bytes, p.Source, tc.want)
			}
		})
	}
}

func TestBindingCapBoundsContext(t *testing.T) {
	m := dense8B()
	kv := KVFor(m)
	if kv.PerPos != 131072 || kv.SidePerPos != 65536 {
		t.Fatalf("KV per position %d, one side %d; want 131072 and 65536", kv.PerPos, kv.SidePerPos)
	}
	tests := []struct {
		name    string
		rng     int64
		want    int
		boundBy string
	}{
		{"4 GiB - 1 range holds 65535 positions", 4*GiB - 1, 65535, "binding cap"},
		{"128 MiB range (lavapipe) holds 2048 positions", 128 * MiB, 2048, "binding cap"},
		{"unknown range leaves the request alone", 0, 131072, ""},
		{"range above the request leaves it alone", 16 * GiB, 131072, ""},
		{"range for 256 positions still arms", 256 * 65536, 256, "binding cap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Compute(Input{Model: m, KV: kv, Scratch: ScratchFor(m), Uploads: uploads(t, 32, 200*MiB, 500*MiB, 500*MiB),
				Device: Device{HeapBytes: 140 * GiB, MaxStorageBufferRange: tc.rng}, Ctx: CtxRequest{Requested: 131072}})
			if !p.Verdict.Armed || p.Ctx.Chosen != tc.want || p.Ctx.BoundBy != tc.boundBy {
				t.Fatalf("armed %v ctx %d bound by %q, want armed at %d bound by %q (%s)", p.Verdict.Armed, p.Ctx.Chosen, p.Ctx.BoundBy, tc.want, tc.boundBy, p.Verdict.Text)
			}
		})
	}
}

func TestSeedLinuxHeapWithoutReportArmsWithTwoGiBHeadroom(t *testing.T) {
	p := Compute(seedInput(t, false))
	if MBDown(p.CapBytes) != 16303-2048 || MBDown(p.UsableBytes) != 12207 {
		t.Fatalf("cap %d MB usable %d MB, want 14255 and 12207", MBDown(p.CapBytes), MBDown(p.UsableBytes))
	}
	if MBUp(p.NeedBytes) != 16464 {
		t.Fatalf("need at ctx 39584 = %d MB, want 16464", MBUp(p.NeedBytes))
	}
	want := "resident driver armed (32 layers, dim 4096, ctx 4840, kv f16) - weights 11167 MB + KV 605 MB + scratch 349 MB of 12207 MB (heap 16303 MB - 2048 MB reserve - 2048 MB headroom)"
	if !p.Verdict.Armed || p.Verdict.Text != want || !p.Ctx.Replanned {
		t.Fatalf("verdict\n got %q\nwant %q (replanned %v)", p.Verdict.Text, want, p.Ctx.Replanned)
	}
	if p.Split != nil {
		t.Fatalf("an armed plan carries a split: %+v", p.Split)
	}
}

func TestSeedUnderWDDMShareDeclinesWithWeightsAlone(t *testing.T) {
	p := Compute(seedInput(t, true))
	want := "resident driver declined - needs 16464 MB of 10406 MB (weights alone 11167 MB) - no driver reported free memory, so 3849 MB stands as headroom (27% of the cap under WDDM); VKLLM_GPU_VRAM_MB=<MiB> pins the cap"
	if p.Verdict.Armed || p.Verdict.Text != want {
		t.Fatalf("verdict\n got %q\nwant %q", p.Verdict.Text, want)
	}
}

func TestContextSelection(t *testing.T) {
	m := dense8B()
	const scratch = 512 * MiB // whole MiB, so a pin leaves an exact room
	base := func(t *testing.T) Input {
		return Input{Model: m, KV: KVFor(m), Scratch: Scratch{Window: ScratchWindow, Total: scratch}, Uploads: uploads(t, 32, 200*MiB, 500*MiB, 500*MiB), // 7400 MiB
			Device: Device{HeapBytes: 140 * GiB, MaxStorageBufferRange: 4*GiB - 1}}
	}
	// usable for exactly n positions at 128 KiB each after 7400 MiB weights and the scratch
	pinFor := func(positions int64) Pin {
		return Pin{MB: int(MBUp(7400*MiB + scratch + positions*131072)), Source: PinFlag}
	}
	tests := []struct {
		name      string
		edit      func(*Input)
		armed     bool
		ctx       int
		replanned bool
		fit       int
	}{
		{"request is the start", func(in *Input) { in.Ctx.Requested = 8192 }, true, 8192, false, 0},
		{"model length is the start without a request", func(in *Input) {}, true, 65535, false, 0},
		{"VKLLM_GPU_CTX_MAX bounds the start", func(in *Input) { in.Ctx.Max = 16384 }, true, 16384, false, 0},
		{"no length anywhere starts at 4096", func(in *Input) { in.Model.CtxLength = 0 }, true, 4096, false, 0},
		{"exact fit arms without a re-plan", func(in *Input) { in.Ctx.Requested = 8192; in.Pin = pinFor(8192) }, true, 8192, false, 0},
		{"short room re-plans at 7/8", func(in *Input) { in.Ctx.Requested = 32768; in.Pin = pinFor(8192) }, true, 8192 * 7 / 8, true, 8192 * 7 / 8},
		{"re-plan below the floor declines", func(in *Input) { in.Ctx.Requested = 32768; in.Pin = pinFor(4096) }, false, 32768, false, 3584},
		{"a lower VKLLM_GPU_MIN_CTX lets it arm", func(in *Input) { in.Ctx.Requested = 32768; in.Ctx.MinCtx = 2048; in.Pin = pinFor(4096) }, true, 3584, true, 3584},
		{"VKLLM_GPU_MIN_CTX under 256 is raised to 256", func(in *Input) { in.Ctx.Requested = 32768; in.Ctx.MinCtx = 16; in.Pin = pinFor(256) }, false, 32768, false, 224},
		{"--ctx-strict declines instead of shrinking", func(in *Input) { in.Ctx.Requested = 32768; in.Ctx.Strict = true; in.Pin = pinFor(8192) }, false, 32768, false, 7168},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			tc.edit(&in)
			p := Compute(in)
			if p.Verdict.Armed != tc.armed || p.Ctx.Chosen != tc.ctx || p.Ctx.Replanned != tc.replanned || p.Ctx.FitCtx != tc.fit {
				t.Fatalf("armed %v ctx %d replanned %v fit %d; want %v %d %v %d (%s)", p.Verdict.Armed, p.Ctx.Chosen, p.Ctx.Replanned, p.Ctx.FitCtx,
					tc.armed, tc.ctx, tc.replanned, tc.fit, p.Verdict.Text)
			}
			if p.Ctx.Floor < LeastCtx {
				t.Fatalf("floor %d below %d", p.Ctx.Floor, LeastCtx)
			}
			if p.Verdict.Armed && p.need(p.Ctx.Chosen) > p.UsableBytes {
				t.Fatalf("armed at ctx %d needing %d of %d bytes", p.Ctx.Chosen, p.need(p.Ctx.Chosen), p.UsableBytes)
			}
		})
	}
}

func TestVerdictTexts(t *testing.T) {
	m := dense8B()
	base := func(t *testing.T) Input {
		return Input{Model: m, KV: KVFor(m), Scratch: ScratchFor(m), Uploads: uploads(t, 32, 200*MiB, 500*MiB, 500*MiB), // 7400 MiB
			Device: Device{Index: 1, HeapBytes: 12 * GiB, MaxStorageBufferRange: 4*GiB - 1}, Ctx: CtxRequest{Requested: 32768}}
	}
	tests := []struct {
		name string
		edit func(*Input)
		want string
	}{
		{"armed under the env pin", func(in *Input) { in.Pin = Pin{MB: 20000, Source: PinEnv} },
			"resident driver armed (32 layers, dim 4096, ctx 32768, kv f16) - weights 7400 MB + KV 4096 MB + scratch 537 MB of 20000 MB (pinned by VKLLM_GPU_VRAM_MB)"},
		{"armed under the stored pin", func(in *Input) { in.Pin = Pin{MB: 20000, Source: PinStore} },
			"resident driver armed (32 layers, dim 4096, ctx 32768, kv f16) - weights 7400 MB + KV 4096 MB + scratch 537 MB of 20000 MB (pinned for this GPU)"},
		{"armed on reported room", func(in *Input) {
			in.Device.HeapBytes, in.Device.BudgetReported, in.Device.BudgetBytes, in.Device.UsageBytes = 24*GiB, true, 20*GiB, 2*GiB
		}, "resident driver armed (32 layers, dim 4096, ctx 32768, kv f16) - weights 7400 MB + KV 4096 MB + scratch 537 MB of 17152 MB (budget 20480 MB - usage 2048 MB - margin 1280 MB)"},
		{"declined off WDDM with a fit", func(in *Input) {},
			"resident driver declined - needs 12033 MB of 8192 MB at ctx 32768 - would fit at ctx 1788 - no driver reported free memory, so 2048 MB stands as headroom; VKLLM_GPU_VRAM_MB=<MiB> pins the cap"},
		{"declined under the WDDM floor", func(in *Input) { in.Device.WDDM = true; in.Device.HeapBytes = 8 * GiB },
			"resident driver declined - needs 12033 MB of 4096 MB (weights alone 7400 MB) - no driver reported free memory, so 2048 MB stands as headroom (the 2 GiB floor under WDDM); VKLLM_GPU_VRAM_MB=<MiB> pins the cap"},
		{"armed on reported room after a re-plan", func(in *Input) {
			in.Device.BudgetReported, in.Device.BudgetBytes, in.Device.UsageBytes = true, 12*GiB, 2*GiB
		}, "resident driver armed (32 layers, dim 4096, ctx 10748, kv f16) - weights 7400 MB + KV 1344 MB + scratch 537 MB of 9472 MB (budget 12288 MB - usage 2048 MB - margin 768 MB)"},
		{"declined on reported room", func(in *Input) {
			in.Device.BudgetReported, in.Device.BudgetBytes, in.Device.UsageBytes = true, 12*GiB, 3*GiB
		}, "resident driver declined - needs 12033 MB of 8448 MB at ctx 32768 - would fit at ctx 3580 - the driver reported 12288 MB budget and 3072 MB in use, so a 768 MB margin stands as headroom; VKLLM_GPU_VRAM_MB=<MiB> pins the cap"},
		{"declined under the env pin", func(in *Input) { in.Pin = Pin{MB: 7900, Source: PinEnv} },
			"resident driver declined - needs 12033 MB of 7900 MB (weights alone 7400 MB) - VKLLM_GPU_VRAM_MB pins the cap at 7900 MB, so no headroom stands; raise it or unset it to plan from the device"},
		{"declined under the stored pin", func(in *Input) { in.Pin = Pin{MB: 8400, Source: PinStore} },
			"resident driver declined - needs 12033 MB of 8400 MB at ctx 32768 - would fit at ctx 3244 - the pin for this GPU sets the cap at 8400 MB, so no headroom stands; vkllm pin set --device 1 --mb <MiB> raises it, vkllm pin clear removes it"},
		{"declined under --vram-mb", func(in *Input) { in.Pin = Pin{MB: 8400, Source: PinFlag} },
			"resident driver declined - needs 12033 MB of 8400 MB at ctx 32768 - would fit at ctx 3244 - --vram-mb pins the cap at 8400 MB, so no headroom stands; raise it or drop it to plan from the device"},
		{"VKLLM_GPU_RESIDENT=0 forces the split", func(in *Input) { in.Pin = Pin{MB: 20000, Source: PinEnv}; in.ForceSplit = true },
			"resident driver declined - VKLLM_GPU_RESIDENT=0 forces the partial offload (resident it needs 12033 MB of 20000 MB at ctx 32768)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			tc.edit(&in)
			p := Compute(in)
			if p.Verdict.Text != tc.want {
				t.Fatalf("verdict\n got %q\nwant %q", p.Verdict.Text, tc.want)
			}
			armed := strings.HasPrefix(tc.want, "resident driver armed")
			if p.Verdict.Armed != armed || (p.Split != nil) == armed {
				t.Fatalf("armed %v split %v, want armed %v with a split only when declined", p.Verdict.Armed, p.Split != nil, armed)
			}
		})
	}
}

func TestSplitPutsWholeLayersAndTheHeadWhereTheyFit(t *testing.T) {
	m := dense8B()
	m.CtxLength = 4096
	kv := KVFor(m)
	scratch := Scratch{Window: ScratchWindow, Total: 512 * MiB} // whole MiB, so a pin can leave an exact room
	layerAt4096 := 200*MiB + 4096*kv.LayerPos                   // 200 MiB weights + 16 MiB KV
	tests := []struct {
		name     string
		head     int64 // output.weight bytes; 0: tied to the 700 MiB embedding table
		room     int64 // usable beyond the scratch
		force    bool  // VKLLM_GPU_RESIDENT=0
		gpu      int
		headOnGP bool
	}{
		{"22 layers and a head that fits the rest", 100 * MiB, 22*layerAt4096 + 150*MiB, false, 22, true},
		{"22 layers and a head too big for the rest stays on the CPU", 500 * MiB, 22*layerAt4096 + 150*MiB, false, 22, false},
		{"one MiB short of 22 layers gives 21", 100 * MiB, 22*layerAt4096 - MiB, false, 21, true},
		{"forced split puts every layer and the tied head on the GPU", 0, 32*layerAt4096 + 700*MiB, true, 32, true},
		{"forced split keeps a tied head that misses by a MiB on the CPU", 0, 32*layerAt4096 + 699*MiB, true, 32, false},
		{"nothing beyond the scratch puts nothing on the GPU", 100 * MiB, 0, false, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Model: m, KV: kv, Scratch: scratch, Uploads: uploads(t, 32, 200*MiB, 700*MiB, tc.head), ForceSplit: tc.force}
			in.Pin = Pin{MB: int((scratch.Total + tc.room) / MiB), Source: PinFlag}
			p := Compute(in)
			if p.Verdict.Armed || p.Split == nil {
				t.Fatalf("expected a decline with a split, got %q", p.Verdict.Text)
			}
			s := p.Split
			if s.GPULayers != tc.gpu || s.OutputOnGPU != tc.headOnGP || s.FirstGPULayer != 32-tc.gpu {
				t.Fatalf("split %+v, want %d layers from %d, head on GPU %v", *s, tc.gpu, 32-tc.gpu, tc.headOnGP)
			}
			if want := "split: " + itoa(tc.gpu) + " of 32 layers on GPU"; s.Text() != want {
				t.Fatalf("split text %q, want %q", s.Text(), want)
			}
			if s.GPUBytes > p.UsableBytes {
				t.Fatalf("split puts %d bytes on a GPU with %d usable", s.GPUBytes, p.UsableBytes)
			}
		})
	}
}

func TestBindingCapUnderTheLeastContextDeclines(t *testing.T) {
	m := dense8B()
	p := Compute(Input{Model: m, KV: KVFor(m), Scratch: ScratchFor(m), Uploads: uploads(t, 32, 200*MiB, 500*MiB, 500*MiB),
		Device: Device{HeapBytes: 140 * GiB, MaxStorageBufferRange: 255 * 65536}})
	want := "resident driver declined - maxStorageBufferRange 16711680 bytes holds 255 positions of one KV side (65536 bytes per position), under the least context 256"
	if p.Verdict.Armed || p.Verdict.Text != want || p.Split == nil {
		t.Fatalf("verdict\n got %q\nwant %q", p.Verdict.Text, want)
	}
}

// A device that stages prefill weights as fp16 holds WeightStagingBytes more scratch, counted
// in the total, once, and named in the breakdown; one that does not holds none.
func TestWeightStagingIsCountedWhereTheDeviceStages(t *testing.T) {
	base := ScratchFor(dense8B())
	for _, tc := range []struct {
		stages bool
		want   int64
	}{{false, 0}, {true, WeightStagingBytes}} {
		s := base.WithWeightStaging(tc.stages).WithWeightStaging(tc.stages)
		if s.WeightStaging != tc.want || s.Total != base.Total+tc.want {
			t.Errorf("stages %v: staging %d, total %d; want %d and %d", tc.stages, s.WeightStaging, s.Total, tc.want, base.Total+tc.want)
		}
		p := Compute(Input{Model: dense8B(), Uploads: uploads(t, 32, 8*MiB, 64*MiB, 64*MiB), KV: KVFor(dense8B()), Scratch: s,
			Device: Device{Name: "card", HeapBytes: 24 << 30, StagesWeights: tc.stages}, Ctx: CtxRequest{Requested: 4096}})
		if got := strings.Contains(p.Breakdown(), fmt.Sprintf("fp16 weight staging %d MB", WeightStagingBytes/MiB)); got != tc.stages {
			t.Errorf("stages %v: breakdown names the staging: %v\n%s", tc.stages, got, p.Breakdown())
		}
	}
}
