package vulkan

// The cooperative-matrix GEMM tier: prefill matmuls (more than one token) run as fp16
// 16x16x16 cooperative-matrix products with fp32 accumulation (shaders/matmul_coopmat.glsl)
// on devices that report VK_KHR_cooperative_matrix with that shape; every other device, and
// F32 weights everywhere, keep the shared-memory tier (shaders/matmul.glsl). The tier is
// chosen once when the Context opens.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <vulkan/vulkan.h>

#define VKLCM_STYPE_PROPERTIES 1000506001
#define VKLCM_STYPE_DEVICE_PROPERTIES 1000506002

// VkCooperativeMatrixPropertiesKHR, declared here with its registry sType so that headers
// older than the extension build it.
typedef struct {
	VkStructureType sType;
	void* pNext;
	uint32_t MSize, NSize, KSize;
	int32_t AType, BType, CType, ResultType;
	VkBool32 saturatingAccumulation;
	int32_t scope;
} vklcm_props;

typedef struct {
	VkStructureType sType;
	void* pNext;
	VkShaderStageFlags stages;
} vklcm_device_props;

typedef VkResult (*vklcm_pfn_props)(VkPhysicalDevice, uint32_t*, vklcm_props*);

// vklcm_gipa finds vkGetInstanceProcAddr in the loader loader.go already opened.
static PFN_vkGetInstanceProcAddr vklcm_gipa(void) {
	void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_NOLOAD);
	if (!lib) return NULL;
	return (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
}

// vklcm_query fills up to *n shapes (and sets *n to the count), the shader stages that
// support cooperative matrices, and whether the Vulkan memory model is supported.
static VkResult vklcm_query(VkInstance inst, VkPhysicalDevice pd, vklcm_props* out, uint32_t* n, uint32_t* stages, uint32_t* memModel) {
	*stages = 0;
	*memModel = 0;
	PFN_vkGetInstanceProcAddr gipa = vklcm_gipa();
	if (!gipa) return VK_ERROR_INITIALIZATION_FAILED;
	vklcm_pfn_props f = (vklcm_pfn_props)gipa(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
	PFN_vkGetPhysicalDeviceProperties2 getProps2 = (PFN_vkGetPhysicalDeviceProperties2)gipa(inst, "vkGetPhysicalDeviceProperties2");
	PFN_vkGetPhysicalDeviceFeatures2 getFeat2 = (PFN_vkGetPhysicalDeviceFeatures2)gipa(inst, "vkGetPhysicalDeviceFeatures2");
	if (!f || !getProps2 || !getFeat2) { *n = 0; return VK_SUCCESS; }
	for (uint32_t i = 0; i < *n; i++) {
		memset(&out[i], 0, sizeof out[i]);
		out[i].sType = (VkStructureType)VKLCM_STYPE_PROPERTIES;
	}
	VkResult r = f(pd, n, out);
	if (r < 0) return r;
	vklcm_device_props dp = {(VkStructureType)VKLCM_STYPE_DEVICE_PROPERTIES};
	VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
	p2.pNext = &dp;
	getProps2(pd, &p2);
	*stages = dp.stages;
	VkPhysicalDeviceVulkanMemoryModelFeatures mm = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
	VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
	f2.pNext = &mm;
	getFeat2(pd, &f2);
	*memModel = mm.vulkanMemoryModel;
	return VK_SUCCESS;
}
// VkCooperativeMatrixFlexibleDimensionsPropertiesNV (VK_NV_cooperative_matrix2): the
// workgroup-scope shapes, as granularities, and the workgroup size they need.
#define VKLCM_STYPE_FLEX_PROPERTIES 1000593001
typedef struct {
	VkStructureType sType;
	void* pNext;
	uint32_t MGranularity, NGranularity, KGranularity;
	int32_t AType, BType, CType, ResultType;
	VkBool32 saturatingAccumulation;
	int32_t scope;
	uint32_t workgroupInvocations;
} vklcm_flex_props;

typedef VkResult (*vklcm_pfn_flex)(VkPhysicalDevice, uint32_t*, vklcm_flex_props*);

// vklcm_flex_query fills up to *n flexible-dimension entries and sets *n to the count (0
// when the driver exports no query).
static VkResult vklcm_flex_query(VkInstance inst, VkPhysicalDevice pd, vklcm_flex_props* out, uint32_t* n) {
	PFN_vkGetInstanceProcAddr gipa = vklcm_gipa();
	vklcm_pfn_flex f = gipa ? (vklcm_pfn_flex)gipa(inst, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV") : NULL;
	if (!f) { *n = 0; return VK_SUCCESS; }
	for (uint32_t i = 0; i < *n; i++) {
		memset(&out[i], 0, sizeof out[i]);
		out[i].sType = (VkStructureType)VKLCM_STYPE_FLEX_PROPERTIES;
	}
	return f(pd, n, out);
}
*/
import "C"

import (
	"fmt"
	"log/slog"
	"strings"

	vk "github.com/vulkan-go/vulkan"

	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/engine/quant"
)

// CoopmatShape is one cooperative-matrix configuration a device reports
// (VkCooperativeMatrixPropertiesKHR): C[M×N] = A[M×K]·B[K×N] + C.
type CoopmatShape struct {
	M, N, K    int
	A, B, C    string // component types: f16, f32, f64, s8, u8, ...
	Result     string
	Saturating bool
	Scope      string // subgroup, workgroup, device, queue-family
}

func (s CoopmatShape) String() string {
	return fmt.Sprintf("%dx%dx%d %s*%s+%s->%s %s", s.M, s.N, s.K, s.A, s.B, s.C, s.Result, s.Scope)
}

// componentName names a VkComponentTypeKHR value.
func componentName(v int32) string {
	names := []string{"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"}
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("component%d", v)
}

// scopeName names a VkScopeKHR value.
func scopeName(v int32) string {
	switch v {
	case 1:
		return "device"
	case 2:
		return "workgroup"
	case 3:
		return "subgroup"
	case 5:
		return "queue-family"
	}
	return fmt.Sprintf("scope%d", v)
}

// coopmatFacts is what the tier choice needs beyond DeviceInfo.
type coopmatFacts struct {
	shapes   []CoopmatShape
	compute  bool // cooperative matrices are supported in compute shaders
	memModel bool // the Vulkan memory model the shaders' SPIR-V declares
}

func queryCoopmat(inst vk.Instance, pd vk.PhysicalDevice) (coopmatFacts, error) {
	const maxShapes = 64
	props := make([]C.vklcm_props, maxShapes)
	n := C.uint32_t(maxShapes)
	var stages, memModel C.uint32_t
	if r := C.vklcm_query(cInstance(inst), cPhysical(pd), &props[0], &n, &stages, &memModel); r != C.VK_SUCCESS && r != C.VK_INCOMPLETE {
		return coopmatFacts{}, fmt.Errorf("query cooperative matrix properties: %w", resultError(vk.Result(r)))
	}
	f := coopmatFacts{compute: stages&C.VK_SHADER_STAGE_COMPUTE_BIT != 0, memModel: memModel != 0}
	for _, p := range props[:n] {
		f.shapes = append(f.shapes, CoopmatShape{
			M: int(p.MSize), N: int(p.NSize), K: int(p.KSize),
			A: componentName(int32(p.AType)), B: componentName(int32(p.BType)),
			C: componentName(int32(p.CType)), Result: componentName(int32(p.ResultType)),
			Saturating: p.saturatingAccumulation != 0, Scope: scopeName(int32(p.scope)),
		})
	}
	return f, nil
}

// gemmTier is the prefill GEMM implementation a Context uses.
type gemmTier int

const (
	gemmShared  gemmTier = iota // shaders/matmul.glsl: subgroup-wide rows, shared-memory reduction
	gemmCoopmat                 // shaders/matmul_coopmat.glsl: KHR cooperative matrix, fp16 inputs, fp32 accumulate
)

func (t gemmTier) String() string {
	if t == gemmCoopmat {
		return "cooperative-matrix"
	}
	return "shared-memory"
}

// coopmatShape is the configuration the coopmat shaders are written for.
var coopmatShape = CoopmatShape{M: 16, N: 16, K: 16, A: "f16", B: "f16", C: "f32", Result: "f32", Scope: "subgroup"}

// coopmatSubgroup is the subgroup size the coopmat shaders assume (4 subgroups of 32 per
// 128-thread workgroup).
const coopmatSubgroup = 32

// chooseGEMMTier picks the prefill GEMM tier from the device's facts; reason says why,
// for the roster line.
func chooseGEMMTier(info DeviceInfo, f coopmatFacts) (gemmTier, string) {
	if !info.Features[FeatureCoopmatKHR] {
		return gemmShared, "no VK_KHR_cooperative_matrix"
	}
	var have []string
	found := false
	for _, s := range f.shapes {
		have = append(have, s.String())
		if s.M == coopmatShape.M && s.N == coopmatShape.N && s.K == coopmatShape.K && s.A == coopmatShape.A &&
			s.B == coopmatShape.B && s.C == coopmatShape.C && s.Result == coopmatShape.Result && s.Scope == coopmatShape.Scope && !s.Saturating {
			found = true
		}
	}
	switch {
	case !found:
		return gemmShared, fmt.Sprintf("no %s shape among the %d reported (%s)", coopmatShape, len(f.shapes), strings.Join(have, ", "))
	case !f.compute:
		return gemmShared, "cooperative matrices not supported in compute shaders"
	case !f.memModel:
		return gemmShared, "no Vulkan memory model (vulkanMemoryModel), which the cooperative-matrix shaders declare"
	case !info.Features[FeatureFP16]:
		return gemmShared, "no shaderFloat16, which the cooperative-matrix shaders use for their fp16 tiles"
	case info.SubgroupSize != coopmatSubgroup:
		return gemmShared, fmt.Sprintf("subgroup size %d; the cooperative-matrix shaders are written for %d", info.SubgroupSize, coopmatSubgroup)
	}
	return gemmCoopmat, "shape " + coopmatShape.String() + ", fp16 weight and activation tiles (Q4_0/Q8_0 too, unless the exact tier keeps llama.cpp's order)"
}

// coopmatAbsentCost is the measured cost of running prefill on the shared-memory tier
// instead of the cooperative-matrix tier, for the warning when the extension is absent.
// Measured with BenchmarkPrefillGEMMTiers (coopmat_test.go): one 4096x4096 Q4_K weight times
// 512 tokens, best of 3 submits of 8 GEMMs, GPU time from timestamps: 8.41 ms on the
// shared-memory tier, 0.259 ms on the cooperative-matrix tier's 128x128 tiles (NVIDIA H200,
// 2026-12-02). On the exact tier Q4_0/Q8_0 prefill takes matmul_exact.glsl either way.
const coopmatAbsentCost = "prefill GEMM for K-quant, Q4_1/Q5, i-quant and F16 weights runs on the shared-memory tier, measured 32x slower than the cooperative-matrix tier " +
	"on a 4096x4096 Q4_K x 512-token GEMM (8.4 ms vs 0.26 ms; NVIDIA H200, 2026-12-02)"

// selectGEMMTier queries the cooperative-matrix facts and sets c.gemm; called once by Open.
func (c *Context) selectGEMMTier() {
	var f coopmatFacts
	if c.Info.Features[FeatureCoopmatKHR] {
		var err error
		if f, err = queryCoopmat(c.inst.handle, c.physical); err != nil {
			c.gemm, c.gemmReason = gemmShared, err.Error()
			return
		}
	}
	c.gemm, c.gemmReason = chooseGEMMTier(c.Info, f)
	var flex []flexShape
	if c.gemm == gemmCoopmat && c.cm2Device {
		var err error
		if flex, err = queryFlex(c.inst.handle, c.physical); err != nil {
			c.cm2Able, c.cm2Reason = false, err.Error()
			return
		}
	}
	c.cm2Able, c.cm2Reason = chooseCM2(c.gemm, c.cm2Device, flex)
	c.cm2All = config.GPUCM2.Bool()
	c.cm2Stage = config.GPUCM2Stage.Bool()
	c.cm2F16 = chooseCM2Tile(config.GPUCM2Tile.String())
	if c.cm2Able {
		switch {
		case c.cm2All:
			c.cm2Reason += "; every cm2 type takes them with its blocks decoded in the load (VKLLM_GPU_CM2=1)"
		case c.cm2Stage:
			c.cm2Reason += "; F16 weights take them directly, every other quantized type through an fp16 staging of its rows (256 MiB in two halves, each product beside the next staging; H200 8B Q4_K pp512 +35% over the KHR kernels; VKLLM_GPU_CM2_STAGE=0 keeps the KHR kernels)"
		default:
			c.cm2Reason += "; F16 weights take them, the quantized types the KHR kernels (VKLLM_GPU_CM2_STAGE=0)"
		}
	}
}

// The cooperative matrix 2 kernels (shaders/matmul_cm2.glsl): workgroup-scope matrices of
// cm2BM rows x cm2BN tokens, cm2BK deep, on cm2Invocations threads, loading quantized
// weights through decode functions. They serve the types in cm2Types on devices whose
// VK_NV_cooperative_matrix2 lists that shape (flexible dimensions); every other type keeps
// the KHR kernels of the same tier.
const cm2BM, cm2BN, cm2BK, cm2Invocations = 64, 128, 32, 256

// cm2Tile is one F16 cm2 kernel: its tile of bm rows x bn tokens, bk deep.
type cm2Tile struct {
	kernel     string
	bm, bn, bk int
}

// cm2DefaultTile is the F16 cm2 kernel where K is a multiple of its depth (else
// matmul_cm2_f16, cm2BM x cm2BN x cm2BK, serves): 128x128, 64 deep, its interior tiles on the
// unclamped unrolled path (CM2_FAST). H200, BenchmarkCM2Tiles 4096x14336 x 512: 251 TFLOP/s
// against 127 for 64x128x64 (the default before) and 123 for 128x256x64f; 8B Q4_K pp512 6283
// -> 7912 t/s, 1B Q4_0 30267 -> 38225 (docs/PERF.md, session 11).
var cm2DefaultTile = cm2Tile{"matmul_cm2x_f16_128x128x64f", 128, 128, 64}

// cm2TileCandidates are the F16 cm2 kernels VKLLM_GPU_CM2_TILE picks for A/B measurements, by
// tile (rows x tokens x depth; f: the unclamped interior path): the default and the one before.
var cm2TileCandidates = map[string]cm2Tile{
	"128x128x64f": cm2DefaultTile,
	"64x128x64":   {"matmul_cm2x_f16_64x128x64", 64, 128, 64},
}

// chooseCM2Tile returns the F16 cm2 kernel VKLLM_GPU_CM2_TILE names: the default for "" and
// for a value not among the candidates (which it logs).
func chooseCM2Tile(v string) cm2Tile {
	v = strings.TrimSpace(v)
	if v == "" {
		return cm2DefaultTile
	}
	if t, ok := cm2TileCandidates[v]; ok {
		return t
	}
	slog.Warn("VKLLM_GPU_CM2_TILE names no cm2 tile; the default serves", "value", v, "candidates", "128x128x64f, 64x128x64")
	return cm2DefaultTile
}

var cm2Types = map[quant.Type]bool{quant.Q4_0: true, quant.Q8_0: true, quant.Q4_K: true, quant.Q5_K: true, quant.Q6_K: true, quant.F16: true}

// cm2Faster are the cm2Types whose prefill the cm2 kernels serve by default: measured faster
// than the KHR kernels on the H200 (BenchmarkCM2Tiles, 2026-12-03, 512 tokens: F16 100-107
// TFLOP/s against 47-55). The quantized types' per-element decode in the load kept them slower
// (Q4_K 56-60 TFLOP/s against 58-67, Q4_0 65-84 against 72-82; the 8B pp512 3193 against 4521
// t/s on Q4_0): VKLLM_GPU_CM2=1 takes them too, for A/B.
var cm2Faster = map[quant.Type]bool{quant.F16: true}

// flexShape is one VkCooperativeMatrixFlexibleDimensionsPropertiesNV entry.
type flexShape struct {
	M, N, K     int // granularities
	A, B, C, R  string
	Saturating  bool
	Scope       string
	Invocations int
}

func queryFlex(inst vk.Instance, pd vk.PhysicalDevice) ([]flexShape, error) {
	const maxShapes = 64
	props := make([]C.vklcm_flex_props, maxShapes)
	n := C.uint32_t(maxShapes)
	if r := C.vklcm_flex_query(cInstance(inst), cPhysical(pd), &props[0], &n); r != C.VK_SUCCESS && r != C.VK_INCOMPLETE {
		return nil, fmt.Errorf("query cooperative matrix 2 flexible dimensions: %w", resultError(vk.Result(r)))
	}
	var out []flexShape
	for _, p := range props[:n] {
		out = append(out, flexShape{
			M: int(p.MGranularity), N: int(p.NGranularity), K: int(p.KGranularity),
			A: componentName(int32(p.AType)), B: componentName(int32(p.BType)), C: componentName(int32(p.CType)), R: componentName(int32(p.ResultType)),
			Saturating: p.saturatingAccumulation != 0, Scope: scopeName(int32(p.scope)), Invocations: int(p.workgroupInvocations),
		})
	}
	return out, nil
}

// chooseCM2 decides whether prefill GEMMs take the cooperative matrix 2 kernels: the KHR
// tier must serve, the device must have been created with the extension (workgroup scope,
// flexible dimensions, tensor addressing, block loads and bufferDeviceAddress, on Vulkan
// 1.3), and one flexible-dimensions entry must fit the kernels' f16 x f16 + f32 workgroup
// shape. Whether they are then used is VKLLM_GPU_CM2's call (selectGEMMTier).
func chooseCM2(gemm gemmTier, enabled bool, flex []flexShape) (bool, string) {
	switch {
	case gemm != gemmCoopmat:
		return false, "not used: the KHR cooperative-matrix tier does not serve"
	case !enabled:
		return false, "not used: not enabled at device creation (needs workgroup scope, flexible dimensions, tensor addressing, block loads, bufferDeviceAddress and Vulkan 1.3)"
	}
	for _, f := range flex {
		if f.A == "f16" && f.B == "f16" && f.C == "f32" && f.R == "f32" && !f.Saturating && f.Scope == "workgroup" &&
			f.Invocations == cm2Invocations && f.M > 0 && f.N > 0 && f.K > 0 && cm2BM%f.M == 0 && cm2BN%f.N == 0 && cm2BK%f.K == 0 {
			return true, fmt.Sprintf("prefill GEMM of Q4_0/Q8_0/Q4_K/Q5_K/Q6_K/F16 weights on workgroup-scope %dx%dx%d tiles decoded from the blocks", cm2BM, cm2BN, cm2BK)
		}
	}
	return false, fmt.Sprintf("not used: no f16*f16+f32 workgroup-scope entry of %d invocations dividing %dx%dx%d among the %d flexible-dimension entries", cm2Invocations, cm2BM, cm2BN, cm2BK, len(flex))
}

// gemmSelects is the roster's "selects" text for the KHR cooperative matrix line.
func (c *Context) gemmSelects() string {
	return fmt.Sprintf("prefill GEMM on the %s tier (%s)", c.gemm, c.gemmReason)
}

// usesCoopmat reports whether a matmul of m tokens with weights of type t and rows of k
// elements runs on the cooperative-matrix tier. F32 weights stay on the shared-memory tier:
// an f32 model asks for f32 numerics, and fp16 tiles would round its weights. Q4_0 and Q8_0
// stay there too (see llamaOrderTypes).
func (c *Context) usesCoopmat(t quant.Type, k, m int) bool {
	return c.gemm == gemmCoopmat && m > 1 && k%32 == 0 && t != quant.F32 && t != quant.BF16 && !(c.exact && llamaOrderTypes[t])
}

// BF16 weights take the shared-memory GEMM: their cooperative-matrix kernel has not yet run on
// a device with cooperative matrices (lavapipe has none), so it is not built.

// llamaOrderTypes are the weight types whose products every tier computes in llama.cpp's CPU
// order, bit for bit. For them the fp16 tiles of the cooperative-matrix tier are not close
// enough: on the shared random-weight Q4_0 and Q8_0 models, any last-bit difference in a
// product (fp16 tiles, a different summation order, an approximate division) flips some
// activation's 8-bit rounding downstream and moves logits by up to ~0.25, which broke greedy
// agreement with llama.cpp at reference gaps of 0.052 and 0.075 on the H200 (2026-11-30).
var llamaOrderTypes = map[quant.Type]bool{quant.Q4_0: true, quant.Q8_0: true}

// matMulCoopmat records the cooperative-matrix GEMM (see MatMul; shapes already checked).
func (s *Seq) matMulCoopmat(suf string, w, x, y Binding, k, n, m, xStride, yStride int, accumulate bool) {
	kern := s.kernel("matmul_coopmat_"+suf, 3, 24)
	if kern == nil {
		return
	}
	const bm, bn = 128, 128 // rows and tokens per workgroup (shaders/matmul_coopmat.glsl)
	gx, gy := (n+bm-1)/bm, (m+bn-1)/bn
	if gx > maxGroups || gy > maxGroups {
		s.fail(fmt.Errorf("matmul: %d rows x %d tokens exceed the cooperative-matrix grid", n, m))
		return
	}
	acc := uint32(0)
	if accumulate {
		acc = 1
	}
	s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(m), uint32(xStride), uint32(yStride), acc),
		uint32(gx), uint32(gy), 1, w, x, y)
}

// usesCM2 reports whether a prefill product of m tokens with weights of type t and k-element
// rows takes the cooperative matrix 2 kernels, which read their activations as fp16 (PackF16,
// then MatMulF16X; Resident.project arranges both).
func (c *Context) usesCM2(t quant.Type, k, m int) bool {
	return c.cm2Able && cm2Types[t] && (c.cm2All || cm2Faster[t]) && c.usesCoopmat(t, k, m)
}

// usesCM2Staging reports whether a prefill product of m tokens with weights of type t and
// k-element rows takes the cooperative matrix 2 F16 kernel through an fp16 staging of its
// rows (DequantF16, then MatMulF16X on F16; Resident.project arranges it): a quantized type
// the KHR tier serves that does not take cm2 directly, where VKLLM_GPU_CM2_STAGE asks for it.
func (c *Context) usesCM2Staging(t quant.Type, k, m int) bool {
	return c.cm2Able && c.cm2Stage && t != quant.F16 && k%cm2BK == 0 && !c.usesCM2(t, k, m) && c.usesCoopmat(t, k, m)
}

// StagesPrefillWeights reports whether a device's prefill products stage weight rows as fp16
// (usesCM2Staging), so that the plan counts plan.WeightStagingBytes of scratch for it: the
// device lists NV cooperative matrix 2 and VKLLM_GPU_CM2_STAGE is on. (A context may still
// find the extension unusable, chooseCM2; the plan then holds the bytes unused.)
func StagesPrefillWeights(d DeviceInfo) bool {
	return d.Features[FeatureCoopmat2NV] && config.GPUCM2Stage.Bool()
}

// PackF16 records the rounding of m rows of k activations x (row t at t·xStride) to fp16 into
// xh, packed two a word with rows k apart (2·m·k bytes): the operand of MatMulF16X.
func (s *Seq) PackF16(x, xh Binding, k, m, xStride int) {
	if k%2 != 0 || m < 1 || xStride < k || xh.Size < uint64(2*m*k) || x.Size < uint64(4*((m-1)*xStride+k)) {
		s.fail(fmt.Errorf("pack f16: %d rows of %d activations (even), stride %d, into %d bytes from %d", m, k, xStride, xh.Size, x.Size))
		return
	}
	kern := s.kernel("pack_f16", 2, 16)
	if kern == nil {
		return
	}
	gx, gy := grid1D((m*k/2 + 255) / 256)
	s.Dispatch(kern, Push(uint32(k), uint32(m), uint32(xStride), gx), gx, gy, 1, x, xh)
}

// PackF16SwiGLU records PackF16 of silu(g)·u (swiglu.comp's arithmetic) for m rows of k gate
// and up activations (rows k apart in both) into xh: one pass instead of SwiGLU's and PackF16's.
func (s *Seq) PackF16SwiGLU(g, u, xh Binding, k, m int) {
	if k%2 != 0 || m < 1 || xh.Size < uint64(2*m*k) || g.Size < uint64(4*m*k) || u.Size < uint64(4*m*k) {
		s.fail(fmt.Errorf("pack f16 swiglu: %d rows of %d activations (even) into %d bytes from %d and %d", m, k, xh.Size, g.Size, u.Size))
		return
	}
	kern := s.kernel("pack_f16_swiglu", 3, 12)
	if kern == nil {
		return
	}
	gx, gy := grid1D((m*k/2 + 255) / 256)
	s.Dispatch(kern, Push(uint32(k), uint32(m), gx), gx, gy, 1, g, u, xh)
}

// MatMulF16X records MatMul's product on the cooperative matrix 2 kernels for weights of a
// cm2Types type, with the activations already packed to fp16 by PackF16 (rows k apart).
func (s *Seq) MatMulF16X(t quant.Type, w, xh, y Binding, k, n, m, yStride int, accumulate bool) {
	suf, ok := weightSuffix(t)
	if !ok || !cm2Types[t] || !s.c.cm2Able {
		s.fail(fmt.Errorf("matmul f16x: no cooperative matrix 2 kernel for %v on this device", t))
		return
	}
	if k <= 0 || k%blockElems(t) != 0 || k%cm2BK != 0 || n <= 0 || m <= 0 {
		s.fail(fmt.Errorf("matmul f16x %v: rows of %d elements (a multiple of %d and of %d), %d rows, %d tokens", t, k, blockElems(t), cm2BK, n, m))
		return
	}
	tile := cm2Tile{"matmul_cm2_" + suf, cm2BM, cm2BN, cm2BK}
	if t == quant.F16 && k%s.c.cm2F16.bk == 0 {
		tile = s.c.cm2F16
	}
	gx, gy := (n+tile.bm-1)/tile.bm, (m+tile.bn-1)/tile.bn
	if gx > maxGroups || gy > maxGroups {
		s.fail(fmt.Errorf("matmul f16x: %d rows x %d tokens exceed the grid", n, m))
		return
	}
	kern := s.kernel(tile.kernel, 3, 24)
	if kern == nil {
		return
	}
	acc := uint32(0)
	if accumulate {
		acc = 1
	}
	s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(m), uint32(k), uint32(yStride), acc), uint32(gx), uint32(gy), 1, w, xh, y)
}

// DequantF16 records the staging of rows row0..row0+rows-1 of weight w (type t, k-element
// rows) as fp16 into h, rows k apart (2·rows·k bytes): the operand MatMulF16X multiplies as F16
// weights. Every type the cooperative-matrix kernels read except F16 itself has one.
func (s *Seq) DequantF16(t quant.Type, w, h Binding, k, rows, row0 int) {
	suf, ok := weightSuffix(t)
	be := blockElems(t)
	if !ok || t == quant.F32 || t == quant.F16 || t == quant.BF16 {
		s.fail(fmt.Errorf("dequant f16: no staging kernel for %v weights", t))
		return
	}
	if k <= 0 || k%be != 0 || k%32 != 0 || rows <= 0 || row0 < 0 || h.Size < uint64(2*rows*k) ||
		w.Size < uint64((row0+rows)*(k/be)*t.BlockBytes()) {
		s.fail(fmt.Errorf("dequant f16 %v: rows %d..%d of %d elements (a multiple of %d) from %d bytes into %d", t, row0, row0+rows, k, be, w.Size, h.Size))
		return
	}
	kern := s.kernel("dequant_f16_"+suf, 2, 16)
	if kern == nil {
		return
	}
	gx, gy := grid1D((rows*(k/32) + 255) / 256)
	s.Dispatch(kern, Push(uint32(k), uint32(rows), uint32(row0), gx), gx, gy, 1, w, h)
}
