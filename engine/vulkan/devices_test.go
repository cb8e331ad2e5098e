package vulkan

import (
	"errors"
	"strings"
	"testing"
)

// devicesOrSkip returns the Vulkan devices or skips when this machine has none.
func devicesOrSkip(t *testing.T) []DeviceInfo {
	t.Helper()
	devs, err := Devices()
	if errors.Is(err, ErrNoLoader) || errors.Is(err, ErrNoDevice) {
		t.Skipf("no Vulkan here: %v", err)
	}
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	return devs
}

func TestDevicesReportLimitsHeapsAndKey(t *testing.T) {
	devs := devicesOrSkip(t)
	for i, d := range devs {
		t.Logf("%d: %s (%s, %s %s, api %s) subgroup %d storage %d alloc %d features %s key %s heaps %+v",
			d.Index, d.Name, d.Type, d.DriverName, d.DriverInfo, d.APIVersion, d.SubgroupSize, d.MaxStorageBufferRange, d.MaxAllocationSize, d.FeatureList(), d.Key(), d.Heaps)
		if d.Index != i {
			t.Errorf("device %d has Index %d", i, d.Index)
		}
		if d.Name == "" || d.APIVersion == "" || len(d.UUID) != 32 {
			t.Errorf("device %d: empty name/api or bad uuid %q", i, d.UUID)
		}
		if len(d.Heaps) == 0 || d.MaxStorageBufferRange == 0 || d.MaxAllocationSize == 0 || d.SubgroupSize == 0 {
			t.Errorf("device %d: missing heaps or limits: %+v", i, d)
		}
		if !strings.HasSuffix(d.Key(), ":"+d.UUID) || strings.Count(d.Key(), ":") != 2 {
			t.Errorf("key %q is not vvvv:dddd:uuid", d.Key())
		}
		for _, f := range FeatureNames {
			if _, ok := d.Features[f]; !ok {
				t.Errorf("device %d: feature %q not reported", i, f)
			}
		}
	}
}

func TestChooseDevicePrefersDiscreteThenLargestHeap(t *testing.T) {
	devs := []DeviceInfo{
		{Index: 0, Type: "cpu", Heaps: []Heap{{Size: 64 << 30, DeviceLocal: true}}},
		{Index: 1, Type: "integrated", Heaps: []Heap{{Size: 16 << 30, DeviceLocal: true}}},
		{Index: 2, Type: "discrete", Heaps: []Heap{{Size: 8 << 30, DeviceLocal: true}}},
		{Index: 3, Type: "discrete", Heaps: []Heap{{Size: 24 << 30, DeviceLocal: true}}},
	}
	t.Setenv("VKLLM_DEVICE", "")
	tests := []struct {
		name string
		devs []DeviceInfo
		want int
		pick int
	}{
		{"largest discrete wins", devs, -1, 3},
		{"integrated beats cpu", devs[:2], -1, 1},
		{"explicit index wins", devs, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ChooseDevice(tc.devs, tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if d.Index != tc.pick {
				t.Fatalf("picked %d, want %d", d.Index, tc.pick)
			}
		})
	}
}

func TestChooseDeviceHonoursEnvAndRejectsUnknownIndex(t *testing.T) {
	devs := []DeviceInfo{{Index: 0, Type: "discrete"}, {Index: 1, Type: "cpu"}}
	t.Setenv("VKLLM_DEVICE", "1")
	d, err := ChooseDevice(devs, -1)
	if err != nil || d.Index != 1 {
		t.Fatalf("VKLLM_DEVICE=1 picked %d (%v)", d.Index, err)
	}
	_, err = ChooseDevice(devs, 7)
	if err == nil || !strings.Contains(err.Error(), "vkllm devices") {
		t.Fatalf("index 7 of 2: err %v, want one naming `vkllm devices`", err)
	}
	if _, err := ChooseDevice(nil, -1); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("no devices: err %v, want ErrNoDevice", err)
	}
}
