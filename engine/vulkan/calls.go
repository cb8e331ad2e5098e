package vulkan

// The Vulkan calls whose arguments are arrays of structures go through this file's C, not
// through vulkan-go. vulkan-go copies such an array into C memory whose only owner is a Go
// finalizer on a local variable; the variable is unreachable as soon as the copying helper
// returns, so a garbage collection before or during the C call can free the array while the
// driver reads it (or writes it, for queries). That crashed lavapipe inside the driver about one
// test run in three. Here the arrays live on the C stack for the length of the call, and the
// entry points are the loader's own exports (libvulkan.so.1 exports every Vulkan 1.0 command,
// dispatching on the handle).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <vulkan/vulkan.h>

typedef struct {
	PFN_vkCreateComputePipelines createComputePipelines;
	PFN_vkUpdateDescriptorSets updateDescriptorSets;
	PFN_vkCmdBindPipeline cmdBindPipeline;
	PFN_vkCmdBindDescriptorSets cmdBindDescriptorSets;
	PFN_vkCmdPipelineBarrier cmdPipelineBarrier;
	PFN_vkCmdCopyBuffer cmdCopyBuffer;
	PFN_vkQueueSubmit queueSubmit;
	PFN_vkGetPhysicalDeviceQueueFamilyProperties getQueueFamilies;
	PFN_vkCreateDescriptorSetLayout createDescriptorSetLayout;
	PFN_vkCreatePipelineLayout createPipelineLayout;
	PFN_vkCreateDescriptorPool createDescriptorPool;
	PFN_vkAllocateDescriptorSets allocateDescriptorSets;
} vklc_entry_points;

static vklc_entry_points vklc;

// vklc_init finds the entry points in the loader loader.go opened; it returns the name of
// the first one missing, or NULL.
static const char* vklc_init(void) {
	void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_NOLOAD);
	if (!lib) return "libvulkan.so.1";
#define VKLC_SYM(field, name) if (!(vklc.field = (void*)dlsym(lib, name))) return name;
	VKLC_SYM(createComputePipelines, "vkCreateComputePipelines")
	VKLC_SYM(updateDescriptorSets, "vkUpdateDescriptorSets")
	VKLC_SYM(cmdBindPipeline, "vkCmdBindPipeline")
	VKLC_SYM(cmdBindDescriptorSets, "vkCmdBindDescriptorSets")
	VKLC_SYM(cmdPipelineBarrier, "vkCmdPipelineBarrier")
	VKLC_SYM(cmdCopyBuffer, "vkCmdCopyBuffer")
	VKLC_SYM(queueSubmit, "vkQueueSubmit")
	VKLC_SYM(getQueueFamilies, "vkGetPhysicalDeviceQueueFamilyProperties")
	VKLC_SYM(createDescriptorSetLayout, "vkCreateDescriptorSetLayout")
	VKLC_SYM(createPipelineLayout, "vkCreatePipelineLayout")
	VKLC_SYM(createDescriptorPool, "vkCreateDescriptorPool")
	VKLC_SYM(allocateDescriptorSets, "vkAllocateDescriptorSets")
#undef VKLC_SYM
	return NULL;
}

#define VKLC_MAX_BINDINGS 12

// vklc_create_storage_layout makes a set layout of n storage buffers (bindings 0..n-1, compute
// stage) and a pipeline layout of that one set and pushBytes of push constants.
static VkResult vklc_create_storage_layout(VkDevice dev, uint32_t n, uint32_t pushBytes, VkDescriptorSetLayout* setLayout, VkPipelineLayout* layout) {
	VkDescriptorSetLayoutBinding b[VKLC_MAX_BINDINGS];
	if (n > VKLC_MAX_BINDINGS) return VK_ERROR_INITIALIZATION_FAILED;
	memset(b, 0, sizeof b);
	for (uint32_t i = 0; i < n; i++) {
		b[i].binding = i;
		b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
		b[i].descriptorCount = 1;
		b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
	}
	VkDescriptorSetLayoutCreateInfo sci;
	memset(&sci, 0, sizeof sci);
	sci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
	sci.bindingCount = n;
	sci.pBindings = b;
	VkResult r = vklc.createDescriptorSetLayout(dev, &sci, NULL, setLayout);
	if (r != VK_SUCCESS) return r;
	VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, pushBytes};
	VkPipelineLayoutCreateInfo pci;
	memset(&pci, 0, sizeof pci);
	pci.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
	pci.setLayoutCount = 1;
	pci.pSetLayouts = setLayout;
	pci.pushConstantRangeCount = pushBytes > 0 ? 1 : 0;
	pci.pPushConstantRanges = &pr;
	return vklc.createPipelineLayout(dev, &pci, NULL, layout);
}

static VkResult vklc_create_storage_pool(VkDevice dev, uint32_t maxSets, uint32_t descriptors, VkDescriptorPool* pool) {
	VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptors};
	VkDescriptorPoolCreateInfo ci;
	memset(&ci, 0, sizeof ci);
	ci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
	ci.maxSets = maxSets;
	ci.poolSizeCount = 1;
	ci.pPoolSizes = &size;
	return vklc.createDescriptorPool(dev, &ci, NULL, pool);
}

static VkResult vklc_allocate_set(VkDevice dev, VkDescriptorPool pool, VkDescriptorSetLayout layout, VkDescriptorSet* set) {
	VkDescriptorSetAllocateInfo ai;
	memset(&ai, 0, sizeof ai);
	ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
	ai.descriptorPool = pool;
	ai.descriptorSetCount = 1;
	ai.pSetLayouts = &layout;
	return vklc.allocateDescriptorSets(dev, &ai, set);
}

static VkResult vklc_create_compute_pipeline(VkDevice dev, VkShaderModule module, VkPipelineLayout layout, VkPipeline* out) {
	VkComputePipelineCreateInfo ci;
	memset(&ci, 0, sizeof ci);
	ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
	ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
	ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
	ci.stage.module = module;
	ci.stage.pName = "main";
	ci.layout = layout;
	return vklc.createComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, NULL, out);
}

// vklc_bind_storage writes n storage-buffer ranges into set (bindings 0..n-1), then binds the
// pipeline and the set on cmd.
static void vklc_bind_storage(VkDevice dev, VkCommandBuffer cmd, VkPipeline pipe, VkPipelineLayout layout, VkDescriptorSet set,
		uint32_t n, const uint64_t* bufs, const uint64_t* offs, const uint64_t* ranges) {
	VkDescriptorBufferInfo infos[VKLC_MAX_BINDINGS];
	VkWriteDescriptorSet writes[VKLC_MAX_BINDINGS];
	if (n > VKLC_MAX_BINDINGS) n = VKLC_MAX_BINDINGS;
	memset(writes, 0, sizeof writes);
	for (uint32_t i = 0; i < n; i++) {
		infos[i].buffer = (VkBuffer)(uintptr_t)bufs[i];
		infos[i].offset = offs[i];
		infos[i].range = ranges[i];
		writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
		writes[i].dstSet = set;
		writes[i].dstBinding = i;
		writes[i].descriptorCount = 1;
		writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
		writes[i].pBufferInfo = &infos[i];
	}
	vklc.updateDescriptorSets(dev, n, writes, 0, NULL);
	vklc.cmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
	vklc.cmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, NULL);
}

// vklc_barrier makes every earlier shader or transfer write visible to every later read or write.
static void vklc_barrier(VkCommandBuffer cmd) {
	VkMemoryBarrier mb;
	memset(&mb, 0, sizeof mb);
	mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
	mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
	mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
	VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
	vklc.cmdPipelineBarrier(cmd, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
}

static void vklc_copy(VkCommandBuffer cmd, VkBuffer src, VkBuffer dst, uint64_t srcOff, uint64_t dstOff, uint64_t n) {
	VkBufferCopy region = {srcOff, dstOff, n};
	vklc.cmdCopyBuffer(cmd, src, dst, 1, &region);
}

static VkResult vklc_submit(VkQueue q, VkCommandBuffer cmd, VkFence fence) {
	VkSubmitInfo si;
	memset(&si, 0, sizeof si);
	si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
	si.commandBufferCount = 1;
	si.pCommandBuffers = &cmd;
	return vklc.queueSubmit(q, 1, &si, fence);
}

// vklc_queue_families fills up to max families' flags and timestamp bits and returns how many
// the device has.
static uint32_t vklc_queue_families(VkPhysicalDevice pd, uint32_t max, uint32_t* flags, uint32_t* timestampBits) {
	VkQueueFamilyProperties fams[32];
	uint32_t n = 32;
	vklc.getQueueFamilies(pd, &n, fams);
	for (uint32_t i = 0; i < n && i < max; i++) {
		flags[i] = fams[i].queueFlags;
		timestampBits[i] = fams[i].timestampValidBits;
	}
	return n;
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"
)

var (
	callsOnce sync.Once
	callsErr  error
)

// loadCalls finds this file's entry points; load() must have opened the loader first.
func loadCalls() error {
	callsOnce.Do(func() {
		if missing := C.vklc_init(); missing != nil {
			callsErr = fmt.Errorf("%w (the loader exports no %s)", ErrNoLoader, C.GoString(missing))
		}
	})
	return callsErr
}

func cDevice(d vk.Device) C.VkDevice { return C.VkDevice(unsafe.Pointer(d)) }

func cCommandBuffer(b vk.CommandBuffer) C.VkCommandBuffer {
	return C.VkCommandBuffer(unsafe.Pointer(b))
}

func createComputePipeline(dev vk.Device, module vk.ShaderModule, layout vk.PipelineLayout) (vk.Pipeline, vk.Result) {
	var out C.VkPipeline
	r := C.vklc_create_compute_pipeline(cDevice(dev), C.VkShaderModule(unsafe.Pointer(module)), C.VkPipelineLayout(unsafe.Pointer(layout)), &out)
	return vk.Pipeline(unsafe.Pointer(out)), vk.Result(r)
}

// createStorageLayout makes the set layout of n storage buffers and the pipeline layout of that
// set with pushBytes of push constants. A set layout made before a failing pipeline layout is
// returned for the caller to destroy.
func createStorageLayout(dev vk.Device, n, pushBytes int) (vk.DescriptorSetLayout, vk.PipelineLayout, vk.Result) {
	var setLayout C.VkDescriptorSetLayout
	var layout C.VkPipelineLayout
	r := C.vklc_create_storage_layout(cDevice(dev), C.uint32_t(n), C.uint32_t(pushBytes), &setLayout, &layout)
	return vk.DescriptorSetLayout(unsafe.Pointer(setLayout)), vk.PipelineLayout(unsafe.Pointer(layout)), vk.Result(r)
}

func createStoragePool(dev vk.Device, maxSets, descriptors int) (vk.DescriptorPool, vk.Result) {
	var pool C.VkDescriptorPool
	r := C.vklc_create_storage_pool(cDevice(dev), C.uint32_t(maxSets), C.uint32_t(descriptors), &pool)
	return vk.DescriptorPool(unsafe.Pointer(pool)), vk.Result(r)
}

func allocateSet(dev vk.Device, pool vk.DescriptorPool, layout vk.DescriptorSetLayout) (vk.DescriptorSet, vk.Result) {
	var set C.VkDescriptorSet
	r := C.vklc_allocate_set(cDevice(dev), C.VkDescriptorPool(unsafe.Pointer(pool)), C.VkDescriptorSetLayout(unsafe.Pointer(layout)), &set)
	return vk.DescriptorSet(unsafe.Pointer(set)), vk.Result(r)
}

// storageRange is one storage-buffer binding's buffer, offset and size.
type storageRange struct {
	buf        vk.Buffer
	off, bytes uint64
}

// bindStorage writes ranges into set and binds k's pipeline and the set on cmd.
func bindStorage(dev vk.Device, cmd vk.CommandBuffer, k *Kernel, set vk.DescriptorSet, ranges []storageRange) error {
	if len(ranges) > C.VKLC_MAX_BINDINGS {
		return fmt.Errorf("kernel %q has %d bindings, at most %d supported", k.Name, len(ranges), C.VKLC_MAX_BINDINGS)
	}
	var bufs, offs, sizes [C.VKLC_MAX_BINDINGS]C.uint64_t
	for i, r := range ranges {
		bufs[i], offs[i], sizes[i] = C.uint64_t(uintptr(unsafe.Pointer(r.buf))), C.uint64_t(r.off), C.uint64_t(r.bytes)
	}
	C.vklc_bind_storage(cDevice(dev), cCommandBuffer(cmd), C.VkPipeline(unsafe.Pointer(k.pipeline)), C.VkPipelineLayout(unsafe.Pointer(k.layout)),
		C.VkDescriptorSet(unsafe.Pointer(set)), C.uint32_t(len(ranges)), &bufs[0], &offs[0], &sizes[0])
	return nil
}

func cmdBarrier(cmd vk.CommandBuffer) { C.vklc_barrier(cCommandBuffer(cmd)) }

func cmdCopy(cmd vk.CommandBuffer, src, dst vk.Buffer, srcOff, dstOff, n uint64) {
	C.vklc_copy(cCommandBuffer(cmd), C.VkBuffer(unsafe.Pointer(src)), C.VkBuffer(unsafe.Pointer(dst)), C.uint64_t(srcOff), C.uint64_t(dstOff), C.uint64_t(n))
}

func queueSubmit(q vk.Queue, cmd vk.CommandBuffer, fence vk.Fence) vk.Result {
	return vk.Result(C.vklc_submit(C.VkQueue(unsafe.Pointer(q)), cCommandBuffer(cmd), C.VkFence(unsafe.Pointer(fence))))
}

// queueFamily is what picking a queue needs of one queue family.
type queueFamily struct {
	flags         vk.QueueFlagBits
	timestampBits uint32
}

func queueFamilies(pd vk.PhysicalDevice) []queueFamily {
	const most = 32
	var flags, bits [most]C.uint32_t
	n := int(C.vklc_queue_families(cPhysical(pd), most, &flags[0], &bits[0]))
	out := make([]queueFamily, min(n, most))
	for i := range out {
		out[i] = queueFamily{flags: vk.QueueFlagBits(flags[i]), timestampBits: uint32(bits[i])}
	}
	return out
}
