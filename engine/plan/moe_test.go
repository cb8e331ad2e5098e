package plan

import (
	"strings"
	"testing"
)

// qwen3MoE30B is Qwen3-30B-A3B's shape: 48 layers, 128 experts of width 768, 8 used.
func qwen3MoE30B() Model {
	return Model{Name: "qwen3moe-30b-a3b", Arch: "qwen3moe", Layers: 48, Embd: 2048, FF: 6144, Heads: 32, HeadsKV: 4,
		HeadDimK: 128, HeadDimV: 128, Vocab: 151936, CtxLength: 40960, Experts: 128, ExpertsUsed: 8, ExpertFF: 768}
}

// The experts' tensors are counted like any other: their file bytes, aligned, under ffn.
func TestExpertAndRouterBytesAreCountedAsUploaded(t *testing.T) {
	const router, exps = 2048 * 128 * 4, 768 * 2048 * 128 / 256 * 144 // F32 router, Q4_K experts
	specs := []TensorSpec{{Name: "token_embd.weight", Type: "Q4_K", Size: 1 << 20}}
	for i := 0; i < 2; i++ {
		specs = append(specs,
			TensorSpec{Name: blk(i, "ffn_gate_inp.weight"), Type: "F32", Dims: []uint64{2048, 128}, Size: router},
			TensorSpec{Name: blk(i, "ffn_gate_exps.weight"), Type: "Q4_K", Dims: []uint64{2048, 768, 128}, Size: exps},
			TensorSpec{Name: blk(i, "ffn_up_exps.weight"), Type: "Q4_K", Dims: []uint64{2048, 768, 128}, Size: exps},
			TensorSpec{Name: blk(i, "ffn_down_exps.weight"), Type: "Q4_K", Dims: []uint64{768, 2048, 128}, Size: exps + 100},
			TensorSpec{Name: blk(i, "ffn_gate_inp_shexp.weight"), Type: "F32", Dims: []uint64{2048}, Size: 2048 * 4})
	}
	ups, err := UploadList(specs)
	if err != nil {
		t.Fatal(err)
	}
	p := Compute(Input{Model: qwen3MoE30B(), Uploads: ups})
	ffn := int64(2 * (router + 3*exps + alignUp(100, UploadAlign) + 2048*4))
	if got := p.Weights.ByKind[KindFFN]; got != ffn {
		t.Fatalf("ffn weights %d bytes, want %d (router, experts and shared gate, each aligned)", got, ffn)
	}
	if want := int64(1<<20) + ffn; p.Weights.Bytes != want {
		t.Fatalf("weights %d bytes, want %d", p.Weights.Bytes, want)
	}
}

func TestMoEScratchHoldsEverySelectedExpertsRows(t *testing.T) {
	m := qwen3MoE30B()
	dense := m
	dense.Experts, dense.ExpertsUsed, dense.ExpertFF = 0, 0, 0
	r := int64(ScratchWindow) * 4
	// gate and up for 8 experts of 768 per row (= the dense ff of 6144 here), plus the routing
	want := ScratchFor(dense).Activations + r*(128+2*8+8*2048)
	if got := ScratchFor(m).Activations; got != want {
		t.Fatalf("activations %d bytes, want %d", got, want)
	}
	m.SharedFF = 8192 // a shared expert wider than the selected experts together sizes gate/up
	if got := ScratchFor(m).Activations; got != want+2*r*(8192-6144) {
		t.Fatalf("with a shared expert: activations %d bytes, want %d", got, want+2*r*(8192-6144))
	}
}

func TestArmedLineNamesTheExperts(t *testing.T) {
	m := qwen3MoE30B()
	p := Compute(Input{Model: m, Uploads: uploads(t, 48, 8*MiB, 64*MiB, 64*MiB), KV: KVFor(m), Scratch: ScratchFor(m),
		Device: Device{Name: "big GPU", HeapBytes: 140 * GiB}, Ctx: CtxRequest{Requested: 4096}})
	if !p.Verdict.Armed || !strings.Contains(p.Verdict.Text, "(48 layers, 128 experts (8 used), dim 2048, ctx 4096") {
		t.Fatalf("verdict %q", p.Verdict.Text)
	}
	if b := p.Breakdown(); !strings.Contains(b, "128 experts of width 768, 8 used per token") {
		t.Fatalf("breakdown:\n%s", b)
	}
	d := Compute(Input{Model: dense8B(), Uploads: uploads(t, 32, 8*MiB, 64*MiB, 64*MiB), KV: KVFor(dense8B()), Scratch: ScratchFor(dense8B()),
		Device: Device{Name: "big GPU", HeapBytes: 140 * GiB}, Ctx: CtxRequest{Requested: 4096}})
	if strings.Contains(d.Verdict.Text, "experts") || strings.Contains(d.Breakdown(), "experts") {
		t.Fatalf("a dense model's plan mentions experts: %q", d.Verdict.Text)
	}
}
