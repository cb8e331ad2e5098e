package sidecar

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/vulkan"
)

// TestPlanInputRouteComputesToThePlanRoutesJSON: plan.Compute of POST /vkllm/plan/input's answer
// is byte for byte POST /vkllm/plan's answer for the same request, the contract the UI's
// WebAssembly what-if stands on.
func TestPlanInputRouteComputesToThePlanRoutesJSON(t *testing.T) {
	t.Setenv("VKLLM_DATA_DIR", t.TempDir())
	t.Setenv("VKLLM_GPU_VRAM_MB", "")
	load, _ := newFakeLoader(time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load})
	devs, err := vulkan.Devices()
	if err != nil || len(devs) == 0 {
		var in plan.Input
		if code := ts.do(t, "POST", "/vkllm/plan/input", `{}`, &in); code != 200 || in.Device.HeapBytes != 0 || in.Model.Layers == 0 {
			t.Fatalf("plan input without a Vulkan device (%v): %d %+v, want 200 with the model and an empty device", err, code, in.Model)
		}
		t.Logf("no Vulkan device here (%v): only the device-less input was checked", err)
		return
	}
	for _, body := range []string{
		`{"model":"","vram_mb":300,"ctx":128}`,
		`{"vram_mb":1,"ctx":4096}`,
		`{"vram_mb":1,"ctx":4096,"ctx_strict":true}`,
		`{"ctx":0}`,
		`{"device":0,"ctx":2048}`,
	} {
		t.Run(body, func(t *testing.T) {
			var in plan.Input
			if code := ts.do(t, "POST", "/vkllm/plan/input", body, &in); code != 200 {
				t.Fatalf("POST /vkllm/plan/input: %d", code)
			}
			if !strings.Contains(in.Model.Name, "stories260K") || len(in.Uploads) == 0 || in.Device.HeapBytes == 0 {
				t.Fatalf("input %+v with %d uploads: want the embedded model's on a device", in.Model, len(in.Uploads))
			}
			var planned json.RawMessage
			if code := ts.do(t, "POST", "/vkllm/plan", body, &planned); code != 200 {
				t.Fatalf("POST /vkllm/plan: %d", code)
			}
			want, err := plan.Compute(in).JSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(planned) != string(want) {
				t.Fatalf("plan.Compute(input) differs from the plan route:\n got %s\nwant %s", want, planned)
			}
		})
	}
	for body, code := range map[string]int{`{"ctx":-1}`: 400, `{"model":"/nonexistent.gguf"}`: 422, `{"device":99}`: 422} {
		if got := ts.do(t, "POST", "/vkllm/plan/input", body, nil); got != code {
			t.Errorf("POST /vkllm/plan/input %s: %d, want %d", body, got, code)
		}
	}
}
