package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/plan"
)

// declinedVerdict is the real plan's one-line verdict for a small model on a 1 MiB pin, which
// never fits; forceSplit is VKLLM_GPU_RESIDENT=0.
func declinedVerdict(t *testing.T, forceSplit bool) string {
	t.Helper()
	m := plan.Model{Name: "tiny", Arch: "llama", Layers: 2, Embd: 64, FF: 128, Heads: 4, HeadsKV: 4, HeadDimK: 16, HeadDimV: 16, Vocab: 256, CtxLength: 512}
	ups, err := plan.UploadList([]plan.TensorSpec{
		{Name: "token_embd.weight", Type: "Q8_0", Size: 64 << 10},
		{Name: "blk.0.attn_q.weight", Type: "Q8_0", Size: 16 << 10},
		{Name: "blk.1.attn_q.weight", Type: "Q8_0", Size: 16 << 10},
	})
	if err != nil {
		t.Fatalf("upload list: %v", err)
	}
	p := plan.Compute(plan.Input{
		Model: m, Uploads: ups, KV: plan.KVFor(m), Scratch: plan.ScratchFor(m),
		Device:     plan.Device{Name: "test GPU", HeapBytes: 8 * plan.GiB},
		Pin:        plan.Pin{MB: 1, Source: plan.PinEnv},
		ForceSplit: forceSplit,
	})
	if p.Verdict.Armed {
		t.Fatalf("a 1 MiB pin armed the plan: %s", p.Verdict.Text)
	}
	return p.Verdict.Text
}

func TestCPUReasonSaysWhyInOneSentence(t *testing.T) {
	declined := declinedVerdict(t, false)
	forced := declinedVerdict(t, true)
	wrap := func(s string) string { return fmt.Errorf("%w: %s", ErrGPUDeclined, s).Error() }
	cases := []struct {
		name     string
		want     Backend
		linked   bool
		declined string
		env      map[string]string
		says     []string // the sentence contains each
	}{
		{"--cpu is a setting", BackendCPU, true, "", nil, []string{"On the CPU: forced by --cpu."}},
		{"a build without a GPU backend says so", BackendAuto, false, "", nil, []string{"this build has no GPU backend"}},
		{"the plan's decline is quoted whole", BackendAuto, true, wrap(declined), nil,
			[]string{"On the CPU: declined by the plan, \"" + declined + "\""}},
		{"VKLLM_GPU_RESIDENT=0 is named as the setting that forced it", BackendAuto, true, wrap(forced),
			map[string]string{"VKLLM_GPU_RESIDENT": "0"}, []string{"forced by VKLLM_GPU_RESIDENT=0", "no layer on the GPU", forced}},
		{"a VKLLM_DEVICE naming no device is the setting", BackendAuto, true,
			wrap("VKLLM_DEVICE=7 names no Vulkan device: there are 1 (run `vkllm devices` to list them)"),
			map[string]string{"VKLLM_DEVICE": "7"}, []string{"forced by VKLLM_DEVICE=7, which names no Vulkan device"}},
		{"no device says what to install", BackendAuto, true,
			wrap("no Vulkan device: install a Vulkan driver (ICD) for your GPU, or Mesa's lavapipe for a CPU device (apt install mesa-vulkan-drivers) (the loader found no driver for API 1.1+)"),
			nil, []string{"On the CPU: no Vulkan device found; install", "mesa-vulkan-drivers"}},
		{"no loader says what to install", BackendAuto, true,
			wrap("no Vulkan loader: install the Vulkan runtime (Debian/Ubuntu: apt install libvulkan1 mesa-vulkan-drivers) or a GPU driver that ships one (libvulkan.so.1: cannot open shared object file)"),
			nil, []string{"On the CPU: no Vulkan runtime found; install it", "libvulkan1"}},
		{"a model the driver does not run", BackendAuto, true,
			wrap(`architecture "gemma": not supported by the Vulkan driver (llama, qwen2 and qwen3 only)`),
			nil, []string{"the Vulkan driver does not run this model", `"gemma"`}},
		{"another decline is passed on", BackendAuto, true, wrap("create Vulkan instance: VK_ERROR_INITIALIZATION_FAILED"),
			nil, []string{"On the CPU: the GPU backend declined (create Vulkan instance: VK_ERROR_INITIALIZATION_FAILED)."}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("VKLLM_GPU_RESIDENT", "")
			t.Setenv("VKLLM_DEVICE", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got := cpuReason(tc.want, tc.linked, tc.declined)
			for _, s := range tc.says {
				if !strings.Contains(got, s) {
					t.Errorf("cpuReason = %q, want it to contain %q", got, s)
				}
			}
			if strings.Contains(got, ErrGPUDeclined.Error()) {
				t.Errorf("cpuReason = %q carries the internal %q", got, ErrGPUDeclined)
			}
			if !strings.HasSuffix(got, ".") || strings.Count(got, "\n") > 0 {
				t.Errorf("cpuReason = %q, want one line ending a sentence", got)
			}
		})
	}
}

func TestLoadTellsWhyTheCPURunsTheModel(t *testing.T) {
	t.Cleanup(func() { RegisterGPUBackend("", nil) })
	verdict := declinedVerdict(t, false)
	cases := []struct {
		name    string
		backend GPUBackend // nil: none registered
		want    Backend
		reason  string // ModelInfo.CPUReason contains it; "" wants it empty
	}{
		{"no GPU backend linked", nil, BackendAuto, "this build has no GPU backend"},
		{"the plan declines", func(context.Context, *gguf.File, *model.Model, LoadOptions) (GPURunner, error) {
			return GPURunner{}, fmt.Errorf("%w: %s", ErrGPUDeclined, verdict)
		}, BackendAuto, "declined by the plan, \"" + verdict + "\""},
		{"--cpu", func(context.Context, *gguf.File, *model.Model, LoadOptions) (GPURunner, error) {
			return GPURunner{}, fmt.Errorf("the CPU backend must not consult the GPU")
		}, BackendCPU, "forced by --cpu"},
		{"the GPU takes it", func(_ context.Context, _ *gguf.File, m *model.Model, _ LoadOptions) (GPURunner, error) {
			return GPURunner{Runner: &scriptedRunner{vocab: m.Hyper.VocabSize}, Placement: "resident", Context: 64}, nil
		}, BackendAuto, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			RegisterGPUBackend("fake", tc.backend)
			e, err := Load(context.Background(), LoadOptions{Backend: tc.want, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			info := e.Info()
			switch {
			case tc.reason == "" && info.CPUReason != "":
				t.Fatalf("on %s/%s the CPU reason is %q, want none", info.Backend, info.Placement, info.CPUReason)
			case tc.reason != "" && (info.Backend != "cpu" || !strings.Contains(info.CPUReason, tc.reason)):
				t.Fatalf("backend %q reason %q, want cpu with %q", info.Backend, info.CPUReason, tc.reason)
			}
		})
	}
}

// The time a GPU backend spent on the GPU's instance and device reaches ModelInfo.GPUSetup
// (vkllm bench splits it out of the load line); a load on the CPU has none.
func TestLoadCarriesTheGPUSetupTime(t *testing.T) {
	t.Cleanup(func() { RegisterGPUBackend("", nil) })
	RegisterGPUBackend("fake", func(_ context.Context, _ *gguf.File, m *model.Model, _ LoadOptions) (GPURunner, error) {
		return GPURunner{Runner: &scriptedRunner{vocab: m.Hyper.VocabSize}, Placement: "resident", Context: 64, GPUSetup: 150 * time.Millisecond}, nil
	})
	for _, tc := range []struct {
		backend Backend
		want    time.Duration
	}{{BackendAuto, 150 * time.Millisecond}, {BackendCPU, 0}} {
		e, err := Load(context.Background(), LoadOptions{Backend: tc.backend, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		got := e.Info().GPUSetup
		e.Close()
		if got != tc.want {
			t.Errorf("backend %q: GPU setup %v, want %v", tc.backend, got, tc.want)
		}
	}
}
