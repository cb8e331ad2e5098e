package planinput

import (
	"os"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/engine/vulkan"
)

// tinyGGUF writes a 2-layer llama with q8_0 projections and f32 norms.
func tinyGGUF(t *testing.T) *gguf.File {
	t.Helper()
	return tinyGGUFWith(t, tinyFault{})
}

// tinyFault is what a broken variant of tinyGGUF changes.
type tinyFault struct {
	arch     string // general.architecture instead of llama
	zeroEmbd bool   // llama.embedding_length 0
	drop     string // a tensor left out
}

func tinyGGUFWith(t *testing.T, fault tinyFault) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	arch := "llama"
	if fault.arch != "" {
		arch = fault.arch
	}
	w.SetString("general.architecture", arch)
	embd := uint32(64)
	if fault.zeroEmbd {
		embd = 0
	}
	w.SetUint32("llama.embedding_length", embd)
	w.SetUint32("llama.block_count", 2)
	w.SetUint32("llama.attention.head_count", 4)
	w.SetUint32("llama.attention.head_count_kv", 2)
	w.SetUint32("llama.feed_forward_length", 128)
	w.SetUint32("llama.context_length", 1024)
	add := func(name string, typ quant.Type, dims ...uint64) {
		if name == fault.drop {
			return
		}
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		rb, err := typ.RowBytes(int(dims[0]))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(name, typ, dims, make([]byte, int(n/dims[0])*rb)); err != nil {
			t.Fatalf("add %s: %v", name, err)
		}
	}
	add("token_embd.weight", quant.Q8_0, 64, 100)
	for _, l := range []string{"0", "1"} {
		add("blk."+l+".attn_norm.weight", quant.F32, 64)
		add("blk."+l+".attn_q.weight", quant.Q8_0, 64, 64)
		add("blk."+l+".attn_k.weight", quant.Q8_0, 64, 32)
		add("blk."+l+".attn_v.weight", quant.Q8_0, 64, 32)
		add("blk."+l+".attn_output.weight", quant.Q8_0, 64, 64)
		add("blk."+l+".ffn_norm.weight", quant.F32, 64)
		add("blk."+l+".ffn_gate.weight", quant.Q8_0, 64, 128)
		add("blk."+l+".ffn_up.weight", quant.Q8_0, 64, 128)
		add("blk."+l+".ffn_down.weight", quant.Q8_0, 128, 64)
	}
	add("output_norm.weight", quant.F32, 64)
	data, err := w.Bytes()
	if err != nil {
		t.Fatalf("write gguf: %v", err)
	}
	f, err := gguf.OpenBytes("tiny.gguf", data)
	if err != nil {
		t.Fatalf("open gguf: %v", err)
	}
	return f
}

func TestModelOfReadsTheShapeFromMetadata(t *testing.T) {
	f := tinyGGUF(t)
	m, err := ModelOf(f)
	if err != nil {
		t.Fatal(err)
	}
	want := plan.Model{Name: "tiny.gguf", Arch: "llama", Layers: 2, Embd: 64, FF: 128, Heads: 4, HeadsKV: 2, HeadDimK: 16, HeadDimV: 16, Vocab: 100, CtxLength: 1024}
	if m != want {
		t.Fatalf("ModelOf = %+v\nwant %+v", m, want)
	}
	kv := plan.KVFor(m)
	if kv.PerPos != 2*2*(2*16*2) {
		t.Fatalf("KV per position %d, want 256 (2 layers x K+V x 2 heads x 16 x f16)", kv.PerPos)
	}
}

func TestUploadsSumTheFileTensorsAligned(t *testing.T) {
	f := tinyGGUF(t)
	ups, err := Uploads(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != len(f.Tensors) {
		t.Fatalf("%d uploads for %d tensors", len(ups), len(f.Tensors))
	}
	for i, u := range ups {
		ti := f.Tensors[i]
		if u.Name != ti.Name || u.Size != ti.Size || u.Bytes < ti.Size || u.Bytes%plan.UploadAlign != 0 || u.Offset%plan.UploadAlign != 0 {
			t.Fatalf("upload %d %+v does not lay out tensor %s of %d bytes", i, u, ti.Name, ti.Size)
		}
	}
	last := ups[len(ups)-1]
	p := plan.Compute(plan.Input{Uploads: ups})
	if p.Weights.Bytes != last.Offset+last.Bytes {
		t.Fatalf("plan weights %d bytes, the arena ends at %d", p.Weights.Bytes, last.Offset+last.Bytes)
	}
}

func TestModelOfNamesAMissingKey(t *testing.T) {
	w := gguf.NewWriter()
	w.SetString("general.architecture", "llama")
	w.SetUint32("llama.embedding_length", 64)
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.OpenBytes("bad.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ModelOf(f); err == nil || !strings.Contains(err.Error(), "llama.block_count") {
		t.Fatalf("err = %v, want one naming llama.block_count", err)
	}
}

func TestEmbeddedModelArmsUnderAGenerousPinAndDeclinesUnderATightOne(t *testing.T) {
	f, err := gguf.OpenBytes(embedded.Name, embedded.ModelGGUF)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Input(f, plan.Device{Name: "test", HeapBytes: 8 * plan.GiB}, plan.Pin{MB: 1024, Source: plan.PinFlag}, plan.CtxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	p := plan.Compute(in)
	if !p.Verdict.Armed || p.Ctx.Chosen != in.Model.CtxLength {
		t.Fatalf("under a 1024 MB pin: %s", p.Verdict.Text)
	}
	in.Pin.MB = 1
	p = plan.Compute(in)
	if p.Verdict.Armed || p.Split == nil {
		t.Fatalf("under a 1 MB pin: %s", p.Verdict.Text)
	}
}

func TestSharedModelsPlanTheirFileBytes(t *testing.T) {
	for _, name := range []string{"rand-llama-q8_0.gguf", "rand-llama-f16.gguf"} {
		path := "../../../../shared/models/" + name
		if _, err := os.Stat(path); err != nil {
			t.Skipf("shared models not present at %s: %v", path, err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		ups, err := Uploads(f)
		if err != nil {
			t.Fatal(err)
		}
		var raw, dev int64
		for i, u := range ups {
			raw += f.Tensors[i].Size
			dev += u.Bytes
		}
		if dev < raw || dev-raw >= int64(len(ups))*plan.UploadAlign {
			t.Fatalf("%s: device bytes %d for %d file bytes in %d tensors", name, dev, raw, len(ups))
		}
		f.Close()
	}
}

func TestDeviceOfTakesTheLargestDeviceLocalHeapAndItsBudget(t *testing.T) {
	d := vulkan.DeviceInfo{Index: 2, Name: "gpu", VendorID: 0x10de, DeviceID: 0x2330, UUID: "ab", BudgetReported: true, MaxStorageBufferRange: 1<<32 - 1,
		Heaps: []vulkan.Heap{{Size: 64 << 30, DeviceLocal: false, Budget: 60 << 30}, {Size: 16 << 30, DeviceLocal: true, Budget: 15 << 30, Usage: 1 << 30}, {Size: 256 << 20, DeviceLocal: true}}}
	got := DeviceOf(d)
	want := plan.Device{Index: 2, Name: "gpu", Key: d.Key(), HeapBytes: 16 << 30, BudgetReported: true, BudgetBytes: 15 << 30, UsageBytes: 1 << 30, MaxStorageBufferRange: 1<<32 - 1, WDDM: PlatformWDDM}
	if got != want {
		t.Fatalf("DeviceOf = %+v\nwant %+v", got, want)
	}
	d.BudgetReported = false // negative control: no report, no budget figures
	if got := DeviceOf(d); got.BudgetReported || got.BudgetBytes != 0 {
		t.Fatalf("unreported budget came through: %+v", got)
	}
}

// A device listing NV cooperative matrix 2 stages its prefill weights as fp16 unless
// VKLLM_GPU_CM2_STAGE=0, and its plan's scratch holds the staging buffer; others never do.
func TestDeviceOfStagesWeightsWhereCM2ServesThem(t *testing.T) {
	for _, tc := range []struct {
		cm2  bool
		env  string
		want bool
	}{{true, "", true}, {true, "0", false}, {false, "", false}, {false, "1", false}} {
		t.Setenv("VKLLM_GPU_CM2_STAGE", tc.env)
		d := vulkan.DeviceInfo{Name: "gpu", Features: map[string]bool{vulkan.FeatureCoopmat2NV: tc.cm2}}
		if got := DeviceOf(d).StagesWeights; got != tc.want {
			t.Errorf("cm2 %v, VKLLM_GPU_CM2_STAGE=%q: stages weights %v, want %v", tc.cm2, tc.env, got, tc.want)
		}
	}
}

func TestPinOfPrefersFlagThenEnvThenStore(t *testing.T) {
	tests := []struct {
		name         string
		env          string
		flag, stored int
		want         plan.Pin
	}{
		{"nothing pinned", "", 0, 0, plan.Pin{}},
		{"stored pin", "", 0, 6000, plan.Pin{MB: 6000, Source: plan.PinStore}},
		{"env overrides the stored pin and keeps it to say so", "8000", 0, 6000, plan.Pin{MB: 8000, Source: plan.PinEnv, StoredMB: 6000}},
		{"flag overrides env and store", "8000", 7000, 6000, plan.Pin{MB: 7000, Source: plan.PinFlag, StoredMB: 6000}},
		{"a bad env value is ignored", "lots", 0, 6000, plan.Pin{MB: 6000, Source: plan.PinStore}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("VKLLM_GPU_VRAM_MB", tc.env)
			if got := PinOf(tc.flag, tc.stored); got != tc.want {
				t.Fatalf("PinOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestEnvSettingsReachTheCore(t *testing.T) {
	t.Setenv("VKLLM_GPU_CTX_MAX", "8192")
	t.Setenv("VKLLM_GPU_MIN_CTX", "512")
	t.Setenv("VKLLM_GPU_RESIDENT", "0")
	c := Ctx(100000, true)
	if c != (plan.CtxRequest{Requested: 100000, Max: 8192, MinCtx: 512, Strict: true}) || !ForceSplit() {
		t.Fatalf("Ctx = %+v, ForceSplit %v", c, ForceSplit())
	}
	t.Setenv("VKLLM_GPU_RESIDENT", "1")
	if ForceSplit() {
		t.Fatal("VKLLM_GPU_RESIDENT=1 forces the split")
	}
}

func TestForDeviceAppliesTheEnvironmentPin(t *testing.T) {
	f := tinyGGUF(t)
	d := vulkan.DeviceInfo{Name: "gpu", Heaps: []vulkan.Heap{{Size: 1 << 30, DeviceLocal: true}}}
	t.Setenv("VKLLM_GPU_VRAM_MB", "")
	p, err := ForDevice(f, d, 0, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if p.Verdict.Armed || p.UsableBytes != 0 {
		t.Fatalf("a 1 GiB heap without a pin leaves nothing after the reserve and headroom: %s", p.Verdict.Text)
	}
	t.Setenv("VKLLM_GPU_VRAM_MB", "512")
	p, err = ForDevice(f, d, 100, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Verdict.Armed || p.Pin != (plan.Pin{MB: 512, Source: plan.PinEnv, StoredMB: 100}) {
		t.Fatalf("pin %+v: %s", p.Pin, p.Verdict.Text)
	}
}

// Planning refuses what loading refuses, in the same words (issue 14: plan once armed files
// that run refused, such as "armed, dim 0").
func TestInputRefusesWhatTheModelLoadRefuses(t *testing.T) {
	dev := plan.Device{Name: "test", HeapBytes: 8 * plan.GiB}
	for _, tc := range []struct {
		name  string
		fault tinyFault
	}{
		{"embedding length 0", tinyFault{zeroEmbd: true}},
		{"a missing tensor", tinyFault{drop: "blk.1.ffn_down.weight"}},
		{"an unsupported architecture", tinyFault{arch: "gpt2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tinyGGUFWith(t, tc.fault)
			_, loadErr := model.Load(f)
			if loadErr == nil {
				t.Fatal("model.Load accepted the broken file: the case tests nothing")
			}
			_, err := Input(f, dev, plan.Pin{MB: 1024, Source: plan.PinFlag}, plan.CtxRequest{})
			if err == nil || err.Error() != loadErr.Error() {
				t.Fatalf("plan input error %v, want the load's %q", err, loadErr)
			}
		})
	}
	if _, err := Input(tinyGGUF(t), dev, plan.Pin{MB: 1024, Source: plan.PinFlag}, plan.CtxRequest{}); err != nil {
		t.Fatalf("the good file: %v", err)
	}
}
