// Package vulkan is vkllm's Vulkan backend: device discovery, the compute context (buffers,
// pipelines from embedded SPIR-V, command buffers), the kernels and the resident driver.
// It wraps github.com/vulkan-go/vulkan plus one small cgo file; nothing outside this package
// imports vulkan-go.
package vulkan

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	vk "github.com/vulkan-go/vulkan"

	"github.com/vkllm/vkllm/engine/config"
)

// Heap is one Vulkan memory heap.
type Heap struct {
	Size        uint64 `json:"size"`
	DeviceLocal bool   `json:"device_local"`
	// Budget and Usage come from VK_EXT_memory_budget; 0 when the driver does not report.
	Budget uint64 `json:"budget"`
	Usage  uint64 `json:"usage"`
}

// DeviceInfo describes one Vulkan physical device.
type DeviceInfo struct {
	Index                 int             `json:"index"`
	Name                  string          `json:"name"`
	VendorID              uint32          `json:"vendor_id"`
	DeviceID              uint32          `json:"device_id"`
	UUID                  string          `json:"uuid"`
	Type                  string          `json:"type"` // discrete|integrated|virtual|cpu|other
	DriverName            string          `json:"driver_name"`
	DriverInfo            string          `json:"driver_info"`
	APIVersion            string          `json:"api_version"`
	Heaps                 []Heap          `json:"heaps"`
	BudgetReported        bool            `json:"budget_reported"`
	MaxStorageBufferRange uint64          `json:"max_storage_buffer_range"`
	MaxAllocationSize     uint64          `json:"max_allocation_size"`
	MaxComputeShared      int             `json:"max_compute_shared_memory"` // bytes of workgroup memory a compute shader may declare
	SubgroupSize          int             `json:"subgroup_size"`
	Features              map[string]bool `json:"features"`
}

// Feature names used in DeviceInfo.Features.
const (
	FeatureFP16            = "fp16"
	FeatureInt8Dot         = "int8dot"
	FeatureStorage16       = "storage16"
	FeatureStorage8        = "storage8"
	FeatureCoopmatKHR      = "coopmat_khr"
	FeatureCoopmat2NV      = "coopmat2_nv"
	FeatureMemoryBudget    = "memory_budget"
	FeatureSubgroupArith   = "subgroup_arith"
	FeatureSubgroupShuffle = "subgroup_shuffle"
)

// FeatureNames lists the Features keys in display order.
var FeatureNames = []string{FeatureStorage16, FeatureStorage8, FeatureFP16, FeatureInt8Dot, FeatureCoopmatKHR, FeatureCoopmat2NV, FeatureMemoryBudget, FeatureSubgroupArith, FeatureSubgroupShuffle}

// Key returns a stable per-GPU key, "vvvv:dddd:<uuid>", for pins and stored facts.
func (d DeviceInfo) Key() string {
	return fmt.Sprintf("%04x:%04x:%s", d.VendorID, d.DeviceID, d.UUID)
}

// LargestDeviceLocalHeap returns the size of the largest device-local heap (0 if none).
func (d DeviceInfo) LargestDeviceLocalHeap() uint64 {
	var best uint64
	for _, h := range d.Heaps {
		if h.DeviceLocal && h.Size > best {
			best = h.Size
		}
	}
	return best
}

func deviceTypeName(t uint32) string {
	switch t {
	case 1:
		return "integrated"
	case 2:
		return "discrete"
	case 3:
		return "virtual"
	case 4:
		return "cpu"
	}
	return "other"
}

func versionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v>>22, (v>>12)&0x3ff, v&0xfff)
}

// instance is a Vulkan instance with its physical devices.
type instance struct {
	handle    vk.Instance
	physical  []vk.PhysicalDevice
	messenger *messenger
	validate  bool
	shared    bool // owned by sharedInstances: destroy leaves it alive
}

// The process keeps one instance per validation setting alive for its whole life: creating and
// destroying the last instance of a process over and over makes NVIDIA's driver fail to load
// again ("libnvidia-tls.so: cannot allocate memory in static TLS block", seen on the H200), and
// the app asks for devices whenever the UI does.
var (
	sharedMu        sync.Mutex
	sharedInstances = map[bool]*instance{}
)

// sharedInstance returns the process's instance for this validation setting, creating it once.
// Failures are not cached, so a driver installed later is found by the next call.
func sharedInstance(validate bool) (*instance, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if in := sharedInstances[validate]; in != nil {
		return in, nil
	}
	in, err := newInstance(validate)
	if err != nil {
		return nil, err
	}
	in.shared = true
	sharedInstances[validate] = in
	return in, nil
}

// newInstance creates an instance for API 1.1+ (needed for the *2 queries); with validate it
// enables the Khronos validation layer and a messenger that counts errors, when installed.
func newInstance(validate bool) (*instance, error) {
	if err := load(); err != nil {
		return nil, err
	}
	api := instanceVersion()
	if api < vk.MakeVersion(1, 1, 0) {
		return nil, fmt.Errorf("the Vulkan loader supports only API %s, vkllm needs 1.1 or later: update the Vulkan runtime (libvulkan1)", versionString(api))
	}
	want := vk.MakeVersion(1, 3, 0)
	if api < want {
		want = api
	}
	var layers, exts []string
	if validate {
		if hasLayer("VK_LAYER_KHRONOS_validation") && hasInstanceExtension("VK_EXT_debug_utils") {
			layers = append(layers, "VK_LAYER_KHRONOS_validation\x00")
			exts = append(exts, "VK_EXT_debug_utils\x00")
		} else {
			validate = false
		}
	}
	app := &vk.ApplicationInfo{
		SType:            vk.StructureTypeApplicationInfo,
		PApplicationName: "vkllm\x00",
		PEngineName:      "vkllm\x00",
		ApiVersion:       want,
	}
	ci := &vk.InstanceCreateInfo{
		SType:                   vk.StructureTypeInstanceCreateInfo,
		PApplicationInfo:        app,
		EnabledLayerCount:       uint32(len(layers)),
		PpEnabledLayerNames:     layers,
		EnabledExtensionCount:   uint32(len(exts)),
		PpEnabledExtensionNames: exts,
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(app)
	var h vk.Instance
	if r := vk.CreateInstance(ci, nil, &h); r != vk.Success {
		if r == vk.ErrorIncompatibleDriver {
			return nil, fmt.Errorf("%w (the loader found no driver for API 1.1+)", ErrNoDevice)
		}
		return nil, fmt.Errorf("create Vulkan instance: %w", resultError(r))
	}
	if err := vk.InitInstance(h); err != nil {
		vk.DestroyInstance(h, nil)
		return nil, fmt.Errorf("load Vulkan instance entry points: %w", err)
	}
	in := &instance{handle: h, validate: validate}
	if validate {
		m, ok := createMessenger(h)
		in.messenger, in.validate = m, ok
	}
	var n uint32
	if r := vk.EnumeratePhysicalDevices(h, &n, nil); r != vk.Success {
		in.destroy()
		return nil, fmt.Errorf("enumerate Vulkan devices: %w", resultError(vk.Result(r)))
	}
	if n == 0 {
		in.destroy()
		return nil, ErrNoDevice
	}
	in.physical = make([]vk.PhysicalDevice, n)
	if r := vk.EnumeratePhysicalDevices(h, &n, in.physical); r != vk.Success {
		in.destroy()
		return nil, fmt.Errorf("enumerate Vulkan devices: %w", resultError(vk.Result(r)))
	}
	in.physical = in.physical[:n]
	return in, nil
}

func (in *instance) destroy() {
	if in.shared {
		return
	}
	if in.messenger != nil {
		destroyMessenger(in.handle, in.messenger)
		in.messenger = nil
	}
	vk.DestroyInstance(in.handle, nil)
}

// query reads the facts of physical device i.
func (in *instance) query(i int) (DeviceInfo, error) {
	d, err := queryDevice(in.handle, in.physical[i])
	if err != nil {
		return DeviceInfo{}, fmt.Errorf("query Vulkan device %d: %w", i, err)
	}
	d.Index = i
	if d.MaxAllocationSize == 0 {
		// Vulkan 1.0 devices without maintenance3 promise at least 1 GiB per allocation.
		d.MaxAllocationSize = 1 << 30
	}
	return d, nil
}

// Devices enumerates the Vulkan physical devices without creating any logical device or
// queue. It returns ErrNoLoader or ErrNoDevice (wrapped, naming the remedy) when there is
// nothing to use.
func Devices() ([]DeviceInfo, error) {
	in, err := sharedInstance(false)
	if err != nil {
		return nil, err
	}
	out := make([]DeviceInfo, 0, len(in.physical))
	for i := range in.physical {
		d, err := in.query(i)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// typeRank orders device types for the default choice: discrete first, CPU last.
func typeRank(t string) int {
	switch t {
	case "discrete":
		return 0
	case "integrated":
		return 1
	case "virtual":
		return 2
	case "other":
		return 3
	}
	return 4
}

// ChooseDevice picks the device to use: the index requested (want >= 0), else VKLLM_DEVICE
// when set, else the best device: discrete before integrated before virtual before CPU,
// then the largest device-local heap, then the lowest index.
func ChooseDevice(devs []DeviceInfo, want int) (DeviceInfo, error) {
	if len(devs) == 0 {
		return DeviceInfo{}, ErrNoDevice
	}
	source := "--device"
	if want < 0 && config.Device.Set() {
		want = config.Device.Int()
		source = config.Device.Name
	}
	if want >= 0 {
		for _, d := range devs {
			if d.Index == want {
				return d, nil
			}
		}
		return DeviceInfo{}, fmt.Errorf("%s=%d names no Vulkan device: there are %d (run `vkllm devices` to list them)", source, want, len(devs))
	}
	sorted := append([]DeviceInfo(nil), devs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if typeRank(a.Type) != typeRank(b.Type) {
			return typeRank(a.Type) < typeRank(b.Type)
		}
		if a.LargestDeviceLocalHeap() != b.LargestDeviceLocalHeap() {
			return a.LargestDeviceLocalHeap() > b.LargestDeviceLocalHeap()
		}
		return a.Index < b.Index
	})
	return sorted[0], nil
}

// resultError turns a VkResult into an error with its name.
func resultError(r vk.Result) error {
	if err := vk.Error(r); err != nil {
		return err
	}
	return fmt.Errorf("VkResult %d", int32(r))
}

// FeatureList renders the present features as a comma-separated list ("none" if empty).
func (d DeviceInfo) FeatureList() string {
	var on []string
	for _, f := range FeatureNames {
		if d.Features[f] {
			on = append(on, f)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}
