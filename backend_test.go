package main

import (
	"context"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/vulkan"
)

// The app and its sidecar (`vkllm-app serve`, this same binary) run on the GPU only when this
// package links engine/vulkan/backend, whose init registers it; without the import every load
// ends on the CPU with "no GPU backend is built into this binary".
func TestAppLinksTheVulkanBackend(t *testing.T) {
	if got := engine.GPUBackendName(); got != "vulkan" {
		t.Fatalf("the app's GPU backend is %q, want \"vulkan\": package main must import engine/vulkan/backend (blank), as cmd/vkllm does", got)
	}
}

// TestAppLoadsOnVulkanOrSaysWhy loads the embedded model as the sidecar does (auto backend)
// under the settings a user may have: a pin that arms runs it resident on Vulkan, and every way
// to the CPU says why in the sentence the header shows.
func TestAppLoadsOnVulkanOrSaysWhy(t *testing.T) {
	devs, err := vulkan.Devices()
	if err != nil || len(devs) == 0 {
		// Without a device every case ends on the CPU for that reason; say so and check it.
		t.Logf("no Vulkan device here (%v): checking only the no-device sentence; install mesa-vulkan-drivers for lavapipe to run the GPU cases", err)
		info := loadEmbedded(t, nil)
		if info.Backend != "cpu" || !strings.Contains(info.CPUReason, "no Vulkan") {
			t.Fatalf("backend %q reason %q, want the CPU for want of a Vulkan device", info.Backend, info.CPUReason)
		}
		return
	}
	cases := []struct {
		name      string
		env       map[string]string
		placement string // "resident": Vulkan, no reason; "cpu": the reason contains reason
		reason    string
	}{
		{"a 512 MiB pin arms the resident driver", map[string]string{"VKLLM_GPU_VRAM_MB": "512"}, "resident", ""},
		{"a 1 MiB pin is declined by the plan", map[string]string{"VKLLM_GPU_VRAM_MB": "1"}, "cpu", "On the CPU: declined by the plan, \"resident driver declined - needs"},
		{"VKLLM_GPU_RESIDENT=0 with no layer fitting forces the CPU", map[string]string{"VKLLM_GPU_VRAM_MB": "1", "VKLLM_GPU_RESIDENT": "0"}, "cpu", "On the CPU: forced by VKLLM_GPU_RESIDENT=0"},
		{"a VKLLM_DEVICE naming no device forces the CPU", map[string]string{"VKLLM_DEVICE": "99"}, "cpu", "On the CPU: forced by VKLLM_DEVICE=99"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info := loadEmbedded(t, tc.env)
			switch tc.placement {
			case "resident":
				if info.Backend != "vulkan" || info.Placement != "resident" || info.CPUReason != "" {
					t.Fatalf("backend %q placement %q reason %q, want vulkan resident", info.Backend, info.Placement, info.CPUReason)
				}
			default:
				if info.Backend != "cpu" || !strings.Contains(info.CPUReason, tc.reason) {
					t.Fatalf("backend %q reason %q, want cpu with %q", info.Backend, info.CPUReason, tc.reason)
				}
			}
		})
	}
}

// loadEmbedded loads the embedded model with the sidecar's options under env (every placement
// setting not named is unset) and returns where it runs.
func loadEmbedded(t *testing.T, env map[string]string) engine.ModelInfo {
	t.Helper()
	for _, k := range []string{"VKLLM_GPU_VRAM_MB", "VKLLM_GPU_RESIDENT", "VKLLM_DEVICE", "VKLLM_GPU_CTX_MAX", "VKLLM_GPU_MIN_CTX"} {
		t.Setenv(k, env[k])
	}
	e, err := engine.Load(context.Background(), engine.LoadOptions{Backend: engine.BackendAuto, DeviceIndex: -1, Threads: 1})
	if err != nil {
		t.Fatalf("load the embedded model: %v", err)
	}
	defer e.Close()
	return e.Info()
}
