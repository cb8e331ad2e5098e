package engine

import (
	"strings"

	"github.com/vkllm/vkllm/engine/config"
)

// The phrases cpuReason recognises in a GPU backend's decline. The backend hands its reason over
// as text (ErrGPUDeclined wraps it), so these are the stable openings of the texts it passes on:
// the plan's declined verdict (engine/plan), and the Vulkan loader's and device chooser's errors
// (engine/vulkan). The tests feed cpuReason the real plan's text.
const (
	planDeclined      = "resident driver declined"
	noVulkanDevice    = "no Vulkan device"
	noVulkanLoader    = "no Vulkan loader"
	deviceNotFound    = "names no Vulkan device"
	driverUnsupported = "not supported by the Vulkan driver"
	gpuOutOfMemory    = "ran out of memory uploading the model"
)

// cpuReason is ModelInfo.CPUReason: one sentence for the user saying why the CPU runs the model —
// a setting forced it, there is no Vulkan device, or the plan declined (its verdict quoted). want
// is the backend the load asked for, linked whether a GPU backend is built in, and declined the
// backend's decline error ("" when it was not asked).
func cpuReason(want Backend, linked bool, declined string) string {
	switch {
	case want == BackendCPU:
		return "On the CPU: forced by --cpu."
	case !linked:
		return "On the CPU: this build has no GPU backend."
	}
	d := strings.TrimPrefix(declined, ErrGPUDeclined.Error()+": ")
	switch {
	case strings.HasPrefix(d, planDeclined) && config.GPUResident.Set() && !config.GPUResident.Bool():
		return sentence("On the CPU: forced by " + config.GPUResident.Name + "=0, and the partial offload puts no layer on the GPU (the plan: \"" + d + "\")")
	case strings.HasPrefix(d, planDeclined):
		return sentence("On the CPU: declined by the plan, \"" + d + "\"")
	case strings.Contains(d, deviceNotFound) && config.Device.Set():
		return sentence("On the CPU: forced by " + config.Device.Name + "=" + config.Device.Raw() + ", which names no Vulkan device (`vkllm devices` lists them)")
	case strings.HasPrefix(d, noVulkanDevice):
		return "On the CPU: no Vulkan device found; install your GPU's Vulkan driver, or Mesa's lavapipe (apt install mesa-vulkan-drivers)."
	case strings.HasPrefix(d, noVulkanLoader):
		return "On the CPU: no Vulkan runtime found; install it (apt install libvulkan1 mesa-vulkan-drivers) or a GPU driver that ships one."
	case strings.Contains(d, gpuOutOfMemory):
		return sentence("On the CPU: " + d)
	case strings.Contains(d, driverUnsupported):
		return sentence("On the CPU: the Vulkan driver does not run this model (" + d + ")")
	}
	return sentence("On the CPU: the GPU backend declined (" + d + ")")
}

// sentence ends s with a full stop unless it already ends a sentence.
func sentence(s string) string {
	if strings.HasSuffix(s, ".") || strings.HasSuffix(s, ".)") {
		return s
	}
	return s + "."
}
