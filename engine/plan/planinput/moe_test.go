package planinput

import (
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/quant"
)

func TestQwen3MoEPlansEveryExpertByte(t *testing.T) {
	path := modeltest.TinySynth(t, "", "qwen3moe", quant.Q4_K, 2)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ModelOf(f)
	if err != nil {
		t.Fatal(err)
	}
	if m.Experts != 8 || m.ExpertsUsed != 2 || m.ExpertFF != 128 || m.SharedFF != 0 {
		t.Fatalf("model %+v", m)
	}
	in, err := Input(f, plan.Device{Name: "test GPU", HeapBytes: 8 << 30}, plan.Pin{MB: 4096, Source: plan.PinFlag}, plan.CtxRequest{Requested: 256})
	if err != nil {
		t.Fatal(err)
	}
	p := plan.Compute(in)
	var file, ffn int64
	for _, ti := range f.Tensors {
		b := (ti.Size + plan.UploadAlign - 1) / plan.UploadAlign * plan.UploadAlign
		file += b
		if strings.Contains(ti.Name, "ffn_") && !strings.Contains(ti.Name, "_norm") {
			ffn += b
		}
	}
	if p.Weights.Bytes != file || p.Weights.ByKind[plan.KindFFN] != ffn {
		t.Fatalf("plan weights %d (ffn %d), the file's tensors aligned %d (ffn %d)", p.Weights.Bytes, p.Weights.ByKind[plan.KindFFN], file, ffn)
	}
	if !p.Verdict.Armed || !strings.Contains(p.Verdict.Text, "8 experts (2 used)") {
		t.Fatalf("verdict %q", p.Verdict.Text)
	}
}
