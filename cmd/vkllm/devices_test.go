package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/vulkan"
)

func TestPrintDevicesShowsHeapsBudgetAndDefault(t *testing.T) {
	def := 1
	rep := devicesReport{
		Vulkan: []vulkan.DeviceInfo{
			{Index: 0, Name: "cpu dev", Type: "cpu", DriverName: "llvmpipe", APIVersion: "1.3.0",
				Heaps: []vulkan.Heap{{Size: 2 << 30, DeviceLocal: true}}, MaxStorageBufferRange: 128 << 20, MaxAllocationSize: 2 << 30, SubgroupSize: 8,
				Features: map[string]bool{vulkan.FeatureStorage16: true}},
			{Index: 1, Name: "big gpu", Type: "discrete", DriverName: "nv", APIVersion: "1.4.0", BudgetReported: true,
				Heaps:    []vulkan.Heap{{Size: 24 << 30, DeviceLocal: true, Budget: 20 << 30, Usage: 1 << 30}, {Size: 64 << 30}},
				Features: map[string]bool{vulkan.FeatureCoopmatKHR: true, vulkan.FeatureMemoryBudget: true}},
		},
		Default: &def,
		CPU:     cpuInfo{Model: "Test CPU", Cores: 4},
	}
	var b bytes.Buffer
	printDevices(&b, rep)
	out := b.String()
	for _, want := range []string{
		" [0] cpu dev", "*[1] big gpu",
		"heap 0: 2048 MiB device-local, budget/usage not reported",
		"heap 0: 24576 MiB device-local, budget 20480 MiB, usage 1024 MiB",
		"heap 1: 65536 MiB host",
		"max storage range 128 MiB, max allocation 2048 MiB, subgroup 8",
		"features: storage16", "features: coopmat_khr,memory_budget",
		"CPU: Test CPU, 4 cores",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
