package sidecar

import (
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/vulkan"
)

func TestDevicesRouteListsVulkanDevicesOrSaysWhyNot(t *testing.T) {
	load, _ := newFakeLoader(time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load})
	var rep DevicesReport
	if code := ts.do(t, "GET", "/vkllm/devices", "", &rep); code != 200 {
		t.Fatalf("GET /vkllm/devices: %d", code)
	}
	devs, err := vulkan.Devices()
	if err != nil {
		if rep.VulkanError == "" || len(rep.Vulkan) != 0 {
			t.Fatalf("no Vulkan here (%v) but the route says %+v", err, rep)
		}
		return
	}
	t.Logf("%d Vulkan devices, default %v", len(rep.Vulkan), rep.Default)
	if len(rep.Vulkan) != len(devs) || rep.Default == nil {
		t.Fatalf("route lists %d devices (default %v), vulkan.Devices %d", len(rep.Vulkan), rep.Default, len(devs))
	}
	if rep.CPU.Cores <= 0 {
		t.Errorf("cpu cores %d", rep.CPU.Cores)
	}
}

func TestPlanRouteAnswersPlanJSONWithTheRequestedPin(t *testing.T) {
	t.Setenv("VKLLM_DATA_DIR", t.TempDir())
	t.Setenv("VKLLM_GPU_VRAM_MB", "")
	load, _ := newFakeLoader(time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load})
	var p plan.Plan
	code := ts.do(t, "POST", "/vkllm/plan", `{"model":"","vram_mb":300,"ctx":128}`, &p)
	if devs, err := vulkan.Devices(); err != nil || len(devs) == 0 {
		if code != 422 {
			t.Fatalf("plan without a Vulkan device (%v): %d, want 422", err, code)
		}
		return
	}
	if code != 200 {
		t.Fatalf("POST /vkllm/plan: %d", code)
	}
	t.Logf("plan verdict %+v on %s", p.Verdict, p.Device.Name)
	if p.Pin.MB != 300 || p.Pin.Source != plan.PinFlag || !strings.Contains(p.Model.Name, "stories260K") {
		t.Fatalf("plan %+v: want the embedded model under a 300 MB request pin", p)
	}
	if code := ts.do(t, "POST", "/vkllm/plan", `{"model":"/nonexistent.gguf"}`, nil); code != 422 {
		t.Fatalf("plan of a missing file: %d, want 422", code)
	}
	if code := ts.do(t, "POST", "/vkllm/plan", `{"ctx":-1}`, nil); code != 400 {
		t.Fatalf("plan with a negative ctx: %d, want 400", code)
	}
}
