package vulkan

// This file is the one cgo file next to vulkan-go: it loads the Vulkan loader itself
// (libvulkan.so.1, the runtime name, not the dev-only libvulkan.so that vulkan-go dlopens)
// and makes the Vulkan 1.1+ queries vulkan-go lacks (the *2 property/feature queries with
// pNext chains, VK_EXT_memory_budget, subgroup size, 16/8-bit storage, float16/int8,
// integer dot product, cooperative matrix) plus a debug messenger that counts validation
// errors. Structures newer than Debian 12's headers (cooperative matrix) are declared here
// with their registry sType values, so any Vulkan 1.3 header set builds it.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <vulkan/vulkan.h>

#define VKL_STYPE_COOPMAT_KHR_FEATURES 1000506000
#define VKL_STYPE_COOPMAT2_NV_FEATURES 1000593000

typedef struct {
	VkStructureType sType;
	void* pNext;
	VkBool32 cooperativeMatrix;
	VkBool32 cooperativeMatrixRobustBufferAccess;
} vkl_coopmat_khr_features;

typedef struct {
	VkStructureType sType;
	void* pNext;
	VkBool32 workgroupScope;
	VkBool32 flexibleDimensions;
	VkBool32 reductions;
	VkBool32 conversions;
	VkBool32 perElementOperations;
	VkBool32 tensorAddressing;
	VkBool32 blockLoads;
} vkl_coopmat2_nv_features;

static void* vkl_lib;
static PFN_vkGetInstanceProcAddr vkl_gipa;
static char vkl_err[512];

static const char* vkl_open(void) {
	if (vkl_gipa) return NULL;
	const char* names[] = {"libvulkan.so.1", "libvulkan.so"};
	for (int i = 0; i < 2 && !vkl_lib; i++) vkl_lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!vkl_lib) {
		const char* e = dlerror();
		snprintf(vkl_err, sizeof vkl_err, "%s", e ? e : "libvulkan.so.1 not found");
		return vkl_err;
	}
	vkl_gipa = (PFN_vkGetInstanceProcAddr)dlsym(vkl_lib, "vkGetInstanceProcAddr");
	if (!vkl_gipa) return "libvulkan.so.1 exports no vkGetInstanceProcAddr";
	return NULL;
}

static void* vkl_gipa_ptr(void) { return (void*)vkl_gipa; }

// vkl_instance_version returns the loader's instance version (1.0 when it has no
// vkEnumerateInstanceVersion).
static uint32_t vkl_instance_version(void) {
	PFN_vkEnumerateInstanceVersion f = (PFN_vkEnumerateInstanceVersion)vkl_gipa(NULL, "vkEnumerateInstanceVersion");
	uint32_t v = VK_API_VERSION_1_0;
	if (f) f(&v);
	return v;
}

static int vkl_has_layer(const char* name) {
	PFN_vkEnumerateInstanceLayerProperties f = (PFN_vkEnumerateInstanceLayerProperties)vkl_gipa(NULL, "vkEnumerateInstanceLayerProperties");
	if (!f) return 0;
	uint32_t n = 0;
	if (f(&n, NULL) != VK_SUCCESS || n == 0) return 0;
	VkLayerProperties props[64];
	if (n > 64) n = 64;
	if (f(&n, props) < 0) return 0;
	for (uint32_t i = 0; i < n; i++) if (strcmp(props[i].layerName, name) == 0) return 1;
	return 0;
}

static int vkl_has_instance_ext(const char* name) {
	PFN_vkEnumerateInstanceExtensionProperties f = (PFN_vkEnumerateInstanceExtensionProperties)vkl_gipa(NULL, "vkEnumerateInstanceExtensionProperties");
	if (!f) return 0;
	uint32_t n = 0;
	if (f(NULL, &n, NULL) != VK_SUCCESS || n == 0) return 0;
	VkExtensionProperties props[256];
	if (n > 256) n = 256;
	if (f(NULL, &n, props) < 0) return 0;
	for (uint32_t i = 0; i < n; i++) if (strcmp(props[i].extensionName, name) == 0) return 1;
	return 0;
}

typedef struct {
	VkPhysicalDeviceProperties props;
	char driverName[VK_MAX_DRIVER_NAME_SIZE];
	char driverInfo[VK_MAX_DRIVER_INFO_SIZE];
	uint8_t uuid[VK_UUID_SIZE];
	uint32_t subgroupSize;
	int subgroupArith;
	int subgroupShuffle;
	uint64_t maxAlloc;
	uint32_t heapCount;
	uint64_t heapSize[VK_MAX_MEMORY_HEAPS];
	uint32_t heapFlags[VK_MAX_MEMORY_HEAPS];
	uint64_t heapBudget[VK_MAX_MEMORY_HEAPS];
	uint64_t heapUsage[VK_MAX_MEMORY_HEAPS];
	int budget;
	int storage16, storage8, fp16, int8, int8dot, coopmatKHR, coopmat2NV;
	int extDriverProps, extBudget, extInt8Dot, extCoopmatKHR, extCoopmat2NV, extStorage8, extFloat16Int8, extStorage16;
} vkl_devinfo;

static int vkl_ext_in(VkExtensionProperties* props, uint32_t n, const char* name) {
	for (uint32_t i = 0; i < n; i++) if (strcmp(props[i].extensionName, name) == 0) return 1;
	return 0;
}

// vkl_query fills out for one physical device of an instance created with API 1.1 or later.
static VkResult vkl_query(VkInstance inst, VkPhysicalDevice pd, vkl_devinfo* out) {
	memset(out, 0, sizeof *out);
	PFN_vkGetPhysicalDeviceProperties getProps = (PFN_vkGetPhysicalDeviceProperties)vkl_gipa(inst, "vkGetPhysicalDeviceProperties");
	PFN_vkGetPhysicalDeviceProperties2 getProps2 = (PFN_vkGetPhysicalDeviceProperties2)vkl_gipa(inst, "vkGetPhysicalDeviceProperties2");
	PFN_vkGetPhysicalDeviceFeatures2 getFeat2 = (PFN_vkGetPhysicalDeviceFeatures2)vkl_gipa(inst, "vkGetPhysicalDeviceFeatures2");
	PFN_vkGetPhysicalDeviceMemoryProperties2 getMem2 = (PFN_vkGetPhysicalDeviceMemoryProperties2)vkl_gipa(inst, "vkGetPhysicalDeviceMemoryProperties2");
	PFN_vkGetPhysicalDeviceMemoryProperties getMem = (PFN_vkGetPhysicalDeviceMemoryProperties)vkl_gipa(inst, "vkGetPhysicalDeviceMemoryProperties");
	PFN_vkEnumerateDeviceExtensionProperties enumExt = (PFN_vkEnumerateDeviceExtensionProperties)vkl_gipa(inst, "vkEnumerateDeviceExtensionProperties");
	if (!getProps || !getMem || !enumExt) return VK_ERROR_INITIALIZATION_FAILED;
	getProps(pd, &out->props);

	static VkExtensionProperties exts[1024];
	uint32_t n = 0;
	VkResult r = enumExt(pd, NULL, &n, NULL);
	if (r != VK_SUCCESS) return r;
	if (n > 1024) n = 1024;
	r = enumExt(pd, NULL, &n, exts);
	if (r < 0) return r;
	uint32_t api = out->props.apiVersion;
	int v11 = VK_API_VERSION_MINOR(api) >= 1 || VK_API_VERSION_MAJOR(api) > 1;
	int v12 = VK_API_VERSION_MINOR(api) >= 2 || VK_API_VERSION_MAJOR(api) > 1;
	int v13 = VK_API_VERSION_MINOR(api) >= 3 || VK_API_VERSION_MAJOR(api) > 1;
	out->extDriverProps = v12 || vkl_ext_in(exts, n, "VK_KHR_driver_properties");
	out->extBudget = vkl_ext_in(exts, n, "VK_EXT_memory_budget");
	out->extInt8Dot = v13 || vkl_ext_in(exts, n, "VK_KHR_shader_integer_dot_product");
	out->extCoopmatKHR = vkl_ext_in(exts, n, "VK_KHR_cooperative_matrix");
	out->extCoopmat2NV = vkl_ext_in(exts, n, "VK_NV_cooperative_matrix2");
	out->extStorage8 = v12 || vkl_ext_in(exts, n, "VK_KHR_8bit_storage");
	out->extStorage16 = v11 || vkl_ext_in(exts, n, "VK_KHR_16bit_storage");
	out->extFloat16Int8 = v12 || vkl_ext_in(exts, n, "VK_KHR_shader_float16_int8");

	if (!v11 || !getProps2 || !getFeat2 || !getMem2) {
		VkPhysicalDeviceMemoryProperties mp;
		getMem(pd, &mp);
		out->heapCount = mp.memoryHeapCount;
		for (uint32_t i = 0; i < mp.memoryHeapCount; i++) {
			out->heapSize[i] = mp.memoryHeaps[i].size;
			out->heapFlags[i] = mp.memoryHeaps[i].flags;
		}
		snprintf(out->driverName, sizeof out->driverName, "unknown");
		return VK_SUCCESS;
	}

	VkPhysicalDeviceDriverProperties driver = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
	VkPhysicalDeviceSubgroupProperties subgroup = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
	VkPhysicalDeviceMaintenance3Properties m3 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
	VkPhysicalDeviceIDProperties id = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
	VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
	p2.pNext = &subgroup;
	subgroup.pNext = &m3;
	m3.pNext = &id;
	if (out->extDriverProps) id.pNext = &driver;
	getProps2(pd, &p2);
	out->subgroupSize = subgroup.subgroupSize;
	out->subgroupArith = (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) && (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT);
	out->subgroupShuffle = (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) && (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT);
	out->maxAlloc = m3.maxMemoryAllocationSize;
	memcpy(out->uuid, id.deviceUUID, VK_UUID_SIZE);
	if (out->extDriverProps) {
		memcpy(out->driverName, driver.driverName, sizeof out->driverName);
		memcpy(out->driverInfo, driver.driverInfo, sizeof out->driverInfo);
	} else {
		snprintf(out->driverName, sizeof out->driverName, "unknown");
	}

	VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
	VkPhysicalDevice16BitStorageFeatures s16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
	VkPhysicalDevice8BitStorageFeatures s8 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
	VkPhysicalDeviceShaderFloat16Int8Features f16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
	VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
	vkl_coopmat_khr_features cm = {(VkStructureType)VKL_STYPE_COOPMAT_KHR_FEATURES};
	vkl_coopmat2_nv_features cm2 = {(VkStructureType)VKL_STYPE_COOPMAT2_NV_FEATURES};
	void** tail = &f2.pNext;
	if (out->extStorage16) { *tail = &s16; tail = &s16.pNext; }
	if (out->extStorage8) { *tail = &s8; tail = &s8.pNext; }
	if (out->extFloat16Int8) { *tail = &f16; tail = &f16.pNext; }
	if (out->extInt8Dot) { *tail = &dot; tail = &dot.pNext; }
	if (out->extCoopmatKHR) { *tail = &cm; tail = &cm.pNext; }
	if (out->extCoopmat2NV) { *tail = &cm2; tail = &cm2.pNext; }
	getFeat2(pd, &f2);
	out->storage16 = s16.storageBuffer16BitAccess != 0;
	out->storage8 = s8.storageBuffer8BitAccess != 0;
	out->fp16 = f16.shaderFloat16 != 0;
	out->int8 = f16.shaderInt8 != 0;
	out->int8dot = dot.shaderIntegerDotProduct != 0;
	out->coopmatKHR = cm.cooperativeMatrix != 0;
	out->coopmat2NV = cm2.workgroupScope != 0 && cm2.flexibleDimensions != 0;

	VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
	VkPhysicalDeviceMemoryProperties2 mp2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
	if (out->extBudget) mp2.pNext = &budget;
	getMem2(pd, &mp2);
	out->heapCount = mp2.memoryProperties.memoryHeapCount;
	for (uint32_t i = 0; i < out->heapCount; i++) {
		out->heapSize[i] = mp2.memoryProperties.memoryHeaps[i].size;
		out->heapFlags[i] = mp2.memoryProperties.memoryHeaps[i].flags;
		if (out->extBudget) {
			out->heapBudget[i] = budget.heapBudget[i];
			out->heapUsage[i] = budget.heapUsage[i];
		}
	}
	out->budget = out->extBudget;
	return VK_SUCCESS;
}

// Validation messages: counted by severity; the last error's text is kept for the report.
static volatile int vkl_val_errors;
static volatile int vkl_val_warnings;
static char vkl_val_last[1024];

static VKAPI_ATTR VkBool32 VKAPI_CALL vkl_debug_cb(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
		VkDebugUtilsMessageTypeFlagsEXT type, const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
	(void)type; (void)user;
	if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
		__sync_fetch_and_add(&vkl_val_errors, 1);
		snprintf(vkl_val_last, sizeof vkl_val_last, "%s", data && data->pMessage ? data->pMessage : "");
	} else if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
		__sync_fetch_and_add(&vkl_val_warnings, 1);
	}
	return VK_FALSE;
}

static VkResult vkl_create_messenger(VkInstance inst, VkDebugUtilsMessengerEXT* out) {
	PFN_vkCreateDebugUtilsMessengerEXT f = (PFN_vkCreateDebugUtilsMessengerEXT)vkl_gipa(inst, "vkCreateDebugUtilsMessengerEXT");
	if (!f) return VK_ERROR_EXTENSION_NOT_PRESENT;
	VkDebugUtilsMessengerCreateInfoEXT ci = {VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
	ci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
	ci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
	ci.pfnUserCallback = vkl_debug_cb;
	return f(inst, &ci, NULL, out);
}

static void vkl_destroy_messenger(VkInstance inst, VkDebugUtilsMessengerEXT m) {
	PFN_vkDestroyDebugUtilsMessengerEXT f = (PFN_vkDestroyDebugUtilsMessengerEXT)vkl_gipa(inst, "vkDestroyDebugUtilsMessengerEXT");
	if (f) f(inst, m, NULL);
}

static int vkl_validation_errors(void) { return vkl_val_errors; }
static void vkl_validation_set(int n) { vkl_val_errors = n; }
static const char* vkl_validation_last(void) { return vkl_val_last; }

// vkl_create_device creates a device with one compute queue and the features the kernels
// ride on enabled where present (16/8-bit storage, float16/int8, integer dot product, KHR
// cooperative matrix with the Vulkan memory model).
static VkResult vkl_create_device(VkInstance inst, VkPhysicalDevice pd, uint32_t family, const vkl_devinfo* info, VkDevice* out, int* cm2On) {
	*cm2On = 0;
	PFN_vkCreateDevice f = (PFN_vkCreateDevice)vkl_gipa(inst, "vkCreateDevice");
	if (!f) return VK_ERROR_INITIALIZATION_FAILED;
	float prio = 1.0f;
	VkDeviceQueueCreateInfo q = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
	q.queueFamilyIndex = family;
	q.queueCount = 1;
	q.pQueuePriorities = &prio;
	VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
	VkPhysicalDevice16BitStorageFeatures s16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
	VkPhysicalDevice8BitStorageFeatures s8 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
	VkPhysicalDeviceShaderFloat16Int8Features f16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
	VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
	const char* exts[8];
	uint32_t next = 0;
	void** tail = &f2.pNext;
	if (info->storage16) { s16.storageBuffer16BitAccess = VK_TRUE; *tail = &s16; tail = &s16.pNext; }
	if (info->storage8) { s8.storageBuffer8BitAccess = VK_TRUE; *tail = &s8; tail = &s8.pNext; }
	if (info->fp16 || info->int8) { f16.shaderFloat16 = info->fp16; f16.shaderInt8 = info->int8; *tail = &f16; tail = &f16.pNext; }
	if (info->int8dot) { dot.shaderIntegerDotProduct = VK_TRUE; *tail = &dot; tail = &dot.pNext; }
	uint32_t api = info->props.apiVersion;
	int v12 = VK_API_VERSION_MINOR(api) >= 2 || VK_API_VERSION_MAJOR(api) > 1;
	int v13 = VK_API_VERSION_MINOR(api) >= 3 || VK_API_VERSION_MAJOR(api) > 1;
	if (!v12 && info->storage8) exts[next++] = "VK_KHR_8bit_storage";
	if (!v12 && (info->fp16 || info->int8)) exts[next++] = "VK_KHR_shader_float16_int8";
	if (!v13 && info->int8dot) exts[next++] = "VK_KHR_shader_integer_dot_product";
	if (info->extBudget) exts[next++] = "VK_EXT_memory_budget";
	// The cooperative-matrix GEMM tier (coopmat.go) needs the extension's feature and the
	// Vulkan memory model its SPIR-V declares; both are enabled only when both are supported.
	vkl_coopmat_khr_features cm = {(VkStructureType)VKL_STYPE_COOPMAT_KHR_FEATURES};
	VkPhysicalDeviceVulkanMemoryModelFeatures mm = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
	PFN_vkGetPhysicalDeviceFeatures2 getFeat2 = (PFN_vkGetPhysicalDeviceFeatures2)vkl_gipa(inst, "vkGetPhysicalDeviceFeatures2");
	if (info->coopmatKHR && v12 && getFeat2) {
		VkPhysicalDeviceFeatures2 q = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
		q.pNext = &mm;
		getFeat2(pd, &q);
		mm.pNext = NULL;
		if (mm.vulkanMemoryModel) {
			mm.vulkanMemoryModelDeviceScope = VK_FALSE;
			mm.vulkanMemoryModelAvailabilityVisibilityChains = VK_FALSE;
			cm.cooperativeMatrix = VK_TRUE;
			*tail = &cm; tail = &cm.pNext;
			*tail = &mm; tail = &mm.pNext;
			exts[next++] = "VK_KHR_cooperative_matrix";
		}
	}
	// NV cooperative matrix 2 (the prefill GEMM's cm2 kernels, coopmat.go) rides on the KHR
	// tier above and a Vulkan 1.3 device (its SPIR-V is 1.6); its decode functions take
	// buffer references, so bufferDeviceAddress is enabled with it. Every cm2 feature the
	// device reports is enabled.
	vkl_coopmat2_nv_features cm2 = {(VkStructureType)VKL_STYPE_COOPMAT2_NV_FEATURES};
	VkPhysicalDeviceBufferDeviceAddressFeatures bda = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES};
	if (info->coopmat2NV && cm.cooperativeMatrix && v13 && getFeat2) {
		VkPhysicalDeviceFeatures2 q = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
		q.pNext = &cm2;
		cm2.pNext = &bda;
		getFeat2(pd, &q);
		cm2.pNext = NULL;
		bda.pNext = NULL;
		if (cm2.workgroupScope && cm2.flexibleDimensions && cm2.tensorAddressing && cm2.blockLoads && bda.bufferDeviceAddress) {
			bda.bufferDeviceAddressCaptureReplay = VK_FALSE;
			bda.bufferDeviceAddressMultiDevice = VK_FALSE;
			*tail = &cm2; tail = &cm2.pNext;
			*tail = &bda; tail = &bda.pNext;
			exts[next++] = "VK_NV_cooperative_matrix2";
			*cm2On = 1;
		}
	}
	VkDeviceCreateInfo ci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
	ci.pNext = &f2;
	ci.queueCreateInfoCount = 1;
	ci.pQueueCreateInfos = &q;
	ci.enabledExtensionCount = next;
	ci.ppEnabledExtensionNames = exts;
	return f(pd, &ci, NULL, out);
}
*/
import "C"

import (
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"
)

// ErrNoLoader reports that the Vulkan loader library could not be opened.
var ErrNoLoader = errors.New("no Vulkan loader: install the Vulkan runtime (Debian/Ubuntu: apt install libvulkan1 mesa-vulkan-drivers) or a GPU driver that ships one")

// ErrNoDevice reports a loader with no usable physical device.
var ErrNoDevice = errors.New("no Vulkan device: install a Vulkan driver (ICD) for your GPU, or Mesa's lavapipe for a CPU device (apt install mesa-vulkan-drivers)")

var (
	loadOnce sync.Once
	loadErr  error
)

// load opens libvulkan.so.1 and initialises vulkan-go's global entry points with its
// vkGetInstanceProcAddr.
func load() error {
	loadOnce.Do(func() {
		if msg := C.vkl_open(); msg != nil {
			loadErr = fmt.Errorf("%w (%s)", ErrNoLoader, C.GoString(msg))
			return
		}
		vk.SetGetInstanceProcAddr(C.vkl_gipa_ptr())
		if err := vk.Init(); err != nil {
			loadErr = fmt.Errorf("%w (initialise global entry points: %v)", ErrNoLoader, err)
			return
		}
		loadErr = loadCalls()
	})
	return loadErr
}

func cInstance(i vk.Instance) C.VkInstance { return C.VkInstance(unsafe.Pointer(i)) }

func cPhysical(p vk.PhysicalDevice) C.VkPhysicalDevice { return C.VkPhysicalDevice(unsafe.Pointer(p)) }

// validationErrors returns how many validation errors the debug messenger has seen in this
// process, and the text of the last one.
func validationErrors() (int, string) {
	return int(C.vkl_validation_errors()), C.GoString(C.vkl_validation_last())
}

func instanceVersion() uint32 { return uint32(C.vkl_instance_version()) }

func hasLayer(name string) bool {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	return C.vkl_has_layer(c) != 0
}

func hasInstanceExtension(name string) bool {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	return C.vkl_has_instance_ext(c) != 0
}

// messenger is a debug utils messenger handle.
type messenger struct{ h C.VkDebugUtilsMessengerEXT }

func createMessenger(inst vk.Instance) (*messenger, bool) {
	m := &messenger{}
	if r := C.vkl_create_messenger(cInstance(inst), &m.h); r != C.VK_SUCCESS {
		return nil, false
	}
	return m, true
}

func destroyMessenger(inst vk.Instance, m *messenger) {
	C.vkl_destroy_messenger(cInstance(inst), m.h)
}

// rawDevice keeps the C query result next to the Go facts so device creation can enable
// exactly the features the query found.
type rawDevice struct {
	c C.vkl_devinfo
}

func queryRaw(inst vk.Instance, pd vk.PhysicalDevice) (*rawDevice, error) {
	raw := &rawDevice{}
	if r := C.vkl_query(cInstance(inst), cPhysical(pd), &raw.c); r != C.VK_SUCCESS {
		return nil, resultError(vk.Result(r))
	}
	return raw, nil
}

func queryDevice(inst vk.Instance, pd vk.PhysicalDevice) (DeviceInfo, error) {
	raw, err := queryRaw(inst, pd)
	if err != nil {
		return DeviceInfo{}, err
	}
	ci := &raw.c
	p := &ci.props
	d := DeviceInfo{
		Name:                  C.GoString(&p.deviceName[0]),
		VendorID:              uint32(p.vendorID),
		DeviceID:              uint32(p.deviceID),
		UUID:                  hex.EncodeToString(C.GoBytes(unsafe.Pointer(&ci.uuid[0]), 16)),
		Type:                  deviceTypeName(uint32(p.deviceType)),
		DriverName:            C.GoString(&ci.driverName[0]),
		DriverInfo:            C.GoString(&ci.driverInfo[0]),
		APIVersion:            versionString(uint32(p.apiVersion)),
		BudgetReported:        ci.budget != 0,
		MaxStorageBufferRange: uint64(p.limits.maxStorageBufferRange),
		MaxAllocationSize:     uint64(ci.maxAlloc),
		MaxComputeShared:      int(p.limits.maxComputeSharedMemorySize),
		SubgroupSize:          int(ci.subgroupSize),
		Features: map[string]bool{
			FeatureStorage16:       ci.storage16 != 0,
			FeatureStorage8:        ci.storage8 != 0,
			FeatureFP16:            ci.fp16 != 0,
			FeatureInt8Dot:         ci.int8dot != 0,
			FeatureCoopmatKHR:      ci.coopmatKHR != 0,
			FeatureCoopmat2NV:      ci.coopmat2NV != 0,
			FeatureMemoryBudget:    ci.budget != 0,
			FeatureSubgroupArith:   ci.subgroupArith != 0,
			FeatureSubgroupShuffle: ci.subgroupShuffle != 0,
		},
	}
	for h := 0; h < int(ci.heapCount); h++ {
		d.Heaps = append(d.Heaps, Heap{
			Size:        uint64(ci.heapSize[h]),
			DeviceLocal: ci.heapFlags[h]&C.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT != 0,
			Budget:      uint64(ci.heapBudget[h]),
			Usage:       uint64(ci.heapUsage[h]),
		})
	}
	return d, nil
}

// createLogicalDevice creates the device with one queue of the given family and the
// storage/arithmetic features the query found enabled; cm2 reports whether NV cooperative
// matrix 2 (with bufferDeviceAddress) was enabled.
func createLogicalDevice(inst vk.Instance, pd vk.PhysicalDevice, family uint32, raw *rawDevice) (dev vk.Device, cm2 bool, err error) {
	var d C.VkDevice
	var on C.int
	if r := C.vkl_create_device(cInstance(inst), cPhysical(pd), C.uint32_t(family), &raw.c, &d, &on); r != C.VK_SUCCESS {
		return nil, false, resultError(vk.Result(r))
	}
	return vk.Device(unsafe.Pointer(d)), on != 0, nil
}

// setValidationErrors overwrites the error count (tests use it to undo a deliberate error).
func setValidationErrors(n int) { C.vkl_validation_set(C.int(n)) }
