package vulkan

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"

	"github.com/vkllm/vkllm/engine/config"
)

// Context is one logical device with a compute queue: the owner of every buffer, pipeline
// and command sequence made from it. It is not safe for concurrent use.
type Context struct {
	Info DeviceInfo

	inst     *instance
	physical vk.PhysicalDevice
	raw      *rawDevice
	dev      vk.Device
	queue    vk.Queue
	family   uint32
	cmdPool  vk.CommandPool
	fence    vk.Fence
	uploads  *uploadBatch // open between BeginUploads and EndUploads (upload.go)
	// uploadBatches counts the batches EndUploads ended (NewResident's weights are one each).
	uploadBatches int

	memTypes       []vk.MemoryType
	minOffsetAlign uint64
	timestampNs    float64 // nanoseconds per timestamp tick; 0 when the queue has no timestamps

	gemm             gemmTier // prefill GEMM tier, chosen once at Open (coopmat.go)
	gemmReason       string
	cm2Device        bool    // NV cooperative matrix 2 was enabled at device creation (loader.go)
	cm2Able          bool    // the device can run the cooperative matrix 2 kernels (coopmat.go)
	cm2All           bool    // every cm2Types type takes them, not only cm2Faster (VKLLM_GPU_CM2=1)
	cm2Stage         bool    // quantized prefill products stage their rows as fp16 for the cm2 F16 kernel (VKLLM_GPU_CM2_STAGE=1)
	cm2F16           cm2Tile // the cm2 F16 kernel's tile (VKLLM_GPU_CM2_TILE, an A/B switch)
	stageAhead       bool    // a prefill product runs beside the next fp16 staging (VKLLM_GPU_STAGE_AHEAD, an A/B switch; staging.go)
	splitCap         int     // the most position ranges split attention takes (VKLLM_GPU_ATT_SPLITS, an A/B switch; 0: maxAttentionSplits)
	ropeFold         bool    // the decode step's q/k/v products end as rope_kv does (VKLLM_GPU_ROPE_FOLD, an A/B switch)
	ropeNorms        bool    // per-head query and key norms inside rope_kv_norm (VKLLM_GPU_ROPE_NORMS, an A/B switch)
	moeTile64        bool    // grouped expert products take tiles of up to 64 pairs (the _p64 moe_gemm_coopmat kernels, VKLLM_GPU_MOE_TILE64)
	moeAhead         bool    // the _p64 grouped expert products on moe_gemm_ahead where it fits (VKLLM_GPU_MOE_AHEAD)
	moeTile64MinK    int     // the shortest rows the _p64 kernels take (moeTile64MinK; tests lower and raise it to run both kernels)
	routeSubgroup    bool    // moe_route and router_route_f32 choose in one subgroup where it holds every expert (the _1sg4 variants, VKLLM_GPU_ROUTE_SUBGROUP, on; 0 for A/B)
	attFreshKV       bool    // a decode step's split attention does rope_kv_norm's work (attention_flash_rn, VKLLM_GPU_ATT_FRESH_KV, an A/B switch)
	routerNorm       bool    // a decode step's f32 router normalizes x itself (VKLLM_GPU_ROUTER_NORM, an A/B switch)
	normF32          bool    // a decode step's f32 products of a normed row normalize x themselves (VKLLM_GPU_NORM_F32, an A/B switch)
	chain            bool    // greedy decode keeps the next step queued on the device (VKLLM_GPU_CHAIN, chain.go)
	sampleOnDevice   bool    // sampled decode draws on the device and chains (VKLLM_GPU_SAMPLE, sample.go)
	argmaxWide       bool    // a decode step's greedy argmax over many workgroups (VKLLM_GPU_ARGMAX_WIDE, an A/B switch)
	deviceLogits     bool    // a decode step's logits in device memory, then copied to the host's (VKLLM_GPU_DEVICE_LOGITS, an A/B switch)
	sharedX8         bool    // a decode step's shared expert reads the routed experts' int8 rounding (VKLLM_GPU_SHARED_X8, an A/B switch)
	x8Coop           bool    // a decode step's Q8_0 and Q6_K products copy their blocks through shared memory (matvec_x8_q8_0c, _q6_kc; VKLLM_GPU_X8_COOP, an A/B switch)
	q6kWide          bool    // a decode step's Q6_K products take 64 elements a lane a step (matvec_x8_q6_kw; VKLLM_GPU_Q6K_WIDE)
	convFold         bool    // a decode step's DeltaNet qkv product ends with the convolution (VKLLM_GPU_CONV_FOLD, an A/B switch)
	gateFolds        bool    // a decode step's gated attention splits and gates its queries inside rope_kv_norm and the output's rounding (VKLLM_GPU_GATE_FOLDS, an A/B switch)
	deltaRounds      bool    // a decode step's delta rule rounds its output for the int8 output product (VKLLM_GPU_DELTA_ROUNDS, an A/B switch)
	swigluF32        bool    // a small f32 model's decode down product computes SwiGLU itself (VKLLM_GPU_SWIGLU_F32, an A/B switch)
	deltaFast        bool    // the fast tier's DeltaNet recurrence runs delta_rule_fast (VKLLM_GPU_DELTA_FAST, an A/B switch)
	attCM2MinSpan    int     // the span from which prefill attention takes cm2 (cm2AttentionMinSpan; tests lower it)
	attCM2           bool    // prefill attention runs in one pass on cooperative matrix 2 where it can (VKLLM_GPU_ATT_CM2, an A/B switch)
	attFlash         bool    // split attention takes attention_flash (VKLLM_GPU_ATT_FLASH, an A/B switch; needs subgroup shuffles)
	flashMinRange    int     // attention_flash's shortest position range (VKLLM_GPU_ATT_MIN_RANGE, an A/B knob)
	flashHeads       int     // the most query heads an attention_flash workgroup takes; 0: flashHeadsPerGroup's rule (VKLLM_GPU_ATT_FLASH_HEADS, an A/B knob)
	attFP16          bool    // prefill attention's cooperative-matrix products take fp16 queries and weights once (VKLLM_GPU_ATT_FP16, an A/B switch)
	cm2Reason        string  // why or why not, for the roster
	lanes            int     // threads per matrix row when nonzero (tests: the GPU layout on lavapipe)
	exact            bool    // the exact tier: llama.cpp's CPU order bit for bit (fast.go)
	exactWhy         string  // why the exact tier serves, for the roster
	matvecUnits      int     // units a lane of matvec_fast takes per pass: 1, or 2 for the types with a matvec_fast2_ kernel (fast.go)
	x8               bool    // one-token products of the x8Rows types take matvec_x8 over activations rounded once per input (x8.go)
	matvecShareBelow int     // grids of fewer workgroups share rows among subgroups in matvec_fast (fast.go)
	fusedDecode      bool    // the decode step takes matvec_dec (fast.go): int8 dot products with the norm, rounding and SwiGLU fused
	precompileOn     bool    // a resident model's decode pipelines are made ahead on several cores (VKLLM_GPU_PRECOMPILE; precompile.go)
	windowsAhead     bool    // and its prompt windows' in the background after the load: VKLLM_GPU_PRECOMPILE on a GPU (not a CPU device such as lavapipe)
	routeInExperts   bool    // a decode step's gate and up products choose the experts themselves (VKLLM_GPU_ROUTE_IN_EXPERTS, an A/B switch)
	routerRoute      bool    // a decode step's f32 router chooses the experts in its last workgroup (VKLLM_GPU_ROUTER_ROUTE, an A/B switch)

	pools    []*memPool
	kernelMu sync.Mutex               // guards kernels and making (Kernel may run on several goroutines)
	kernels  map[string]*Kernel       // made pipelines by shader name
	making   map[string]chan struct{} // pipelines being made, closed when done (Kernel)

	staging *Buffer // host-visible bounce buffer for uploads/downloads, grown on demand
	closed  bool
}

// Options tunes Open.
type Options struct {
	// Device is the device index; -1 uses VKLLM_DEVICE, else the best discrete GPU.
	Device int
	// Validate enables the Khronos validation layer (when installed) and counts its errors;
	// VKLLM_VK_VALIDATE=1 turns it on too.
	Validate bool
	// Quiet suppresses the capability roster log lines.
	Quiet bool
}

var warnOnce sync.Map

// Open creates the compute context on the chosen device and logs the capability roster.
func Open(opts Options) (*Context, error) {
	in, err := sharedInstance(opts.Validate || config.ValidationLayer.Bool())
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			in.destroy()
		}
	}()
	devs := make([]DeviceInfo, len(in.physical))
	for i := range in.physical {
		if devs[i], err = in.query(i); err != nil {
			return nil, err
		}
	}
	info, err := ChooseDevice(devs, opts.Device)
	if err != nil {
		return nil, err
	}
	c := &Context{Info: info, inst: in, physical: in.physical[info.Index], kernels: map[string]*Kernel{}}
	if c.raw, err = queryRaw(in.handle, c.physical); err != nil {
		return nil, fmt.Errorf("query Vulkan device %d: %w", info.Index, err)
	}
	if err := c.pickQueueFamily(); err != nil {
		return nil, err
	}
	if c.dev, c.cm2Device, err = createLogicalDevice(in.handle, c.physical, c.family, c.raw); err != nil {
		return nil, fmt.Errorf("create Vulkan device %q: %w", info.Name, err)
	}
	ok = true
	if err := c.init(); err != nil {
		c.Close()
		return nil, err
	}
	c.selectGEMMTier()
	c.selectNumericTier()
	if !opts.Quiet {
		c.logRoster()
		if c.inst.validate {
			slog.Info("vulkan validation layer enabled", "layer", "VK_LAYER_KHRONOS_validation")
		} else if opts.Validate || config.ValidationLayer.Bool() {
			slog.Warn("vulkan validation layer requested but not installed", "remedy", "apt install vulkan-validationlayers")
		}
	}
	return c, nil
}

func (c *Context) pickQueueFamily() error {
	fams := queueFamilies(c.physical)
	best := -1
	for i := range fams {
		flags := fams[i].flags
		if flags&vk.QueueComputeBit == 0 {
			continue
		}
		// Prefer a compute queue with timestamps; a compute-only family beats a graphics one.
		if best < 0 || (fams[best].timestampBits == 0 && fams[i].timestampBits != 0) ||
			(fams[best].flags&vk.QueueGraphicsBit != 0 && flags&vk.QueueGraphicsBit == 0 && fams[i].timestampBits != 0) {
			best = i
		}
	}
	if best < 0 {
		return fmt.Errorf("Vulkan device %q has no compute queue: choose another with --device or VKLLM_DEVICE", c.Info.Name)
	}
	c.family = uint32(best)
	if fams[best].timestampBits != 0 {
		c.timestampNs = float64(c.raw.c.props.limits.timestampPeriod)
	}
	return nil
}

func (c *Context) init() error {
	var q vk.Queue
	vk.GetDeviceQueue(c.dev, c.family, 0, &q)
	c.queue = q
	var mp vk.PhysicalDeviceMemoryProperties
	vk.GetPhysicalDeviceMemoryProperties(c.physical, &mp)
	mp.Deref()
	for i := uint32(0); i < mp.MemoryTypeCount; i++ {
		mt := mp.MemoryTypes[i]
		mt.Deref()
		c.memTypes = append(c.memTypes, mt)
	}
	c.minOffsetAlign = uint64(c.raw.c.props.limits.minStorageBufferOffsetAlignment)
	if c.minOffsetAlign == 0 {
		c.minOffsetAlign = 16
	}
	var pool vk.CommandPool
	if r := vk.CreateCommandPool(c.dev, &vk.CommandPoolCreateInfo{
		SType:            vk.StructureTypeCommandPoolCreateInfo,
		Flags:            vk.CommandPoolCreateFlags(vk.CommandPoolCreateResetCommandBufferBit),
		QueueFamilyIndex: c.family,
	}, nil, &pool); r != vk.Success {
		return fmt.Errorf("create command pool: %w", resultError(r))
	}
	c.cmdPool = pool
	fence, err := c.newFence()
	if err != nil {
		return err
	}
	c.fence = fence
	return nil
}

// newFence creates an unsignalled fence (Seq.Submit signals it, waitFence waits and resets it).
func (c *Context) newFence() (vk.Fence, error) {
	var f vk.Fence // a local: vulkan-go passes its address to C
	if r := vk.CreateFence(c.dev, &vk.FenceCreateInfo{SType: vk.StructureTypeFenceCreateInfo}, nil, &f); r != vk.Success {
		return vk.NullFence, fmt.Errorf("create fence: %w", resultError(r))
	}
	return f, nil
}

// capability is one line of the init roster.
type capability struct {
	name    string
	present bool
	selects string
	absent  string // what is lost, for the one-time warning of an absent fast tier
	fast    bool   // a fast tier worth a warning when absent
	ext     string
}

func (c *Context) capabilities() []capability {
	f := c.Info.Features
	return []capability{
		{name: "16-bit storage", present: f[FeatureStorage16], selects: "enabled; kernels read f16 and quantized blocks as 32-bit words on every tier", ext: "VK_KHR_16bit_storage"},
		{name: "8-bit storage", present: f[FeatureStorage8], selects: "enabled; kernels read quantized bytes from 32-bit words on every tier", ext: "VK_KHR_8bit_storage"},
		{name: "float16 arithmetic", present: f[FeatureFP16], selects: "enabled; kernels compute in f32 (f16 only for KV storage and llama.cpp-matching rounding)", ext: "VK_KHR_shader_float16_int8"},
		{name: "int8 dot product", present: f[FeatureInt8Dot], selects: c.int8Selects(), fast: true, ext: "VK_KHR_shader_integer_dot_product",
			absent: int8AbsentCost},
		{name: "KHR cooperative matrix", present: f[FeatureCoopmatKHR], selects: c.gemmSelects(), fast: true, ext: "VK_KHR_cooperative_matrix",
			absent: coopmatAbsentCost},
		{name: "NV cooperative matrix 2", present: f[FeatureCoopmat2NV], selects: c.cm2Reason, ext: "VK_NV_cooperative_matrix2"},
		{name: "subgroup shuffle", present: f[FeatureSubgroupShuffle], selects: c.attentionSelects(), ext: "VK_SUBGROUP_FEATURE_SHUFFLE_BIT"},
		{name: "numeric tier", present: !c.exact, selects: c.numericSelects(), ext: "VKLLM_GPU_EXACT"},
		{name: "memory budget", present: f[FeatureMemoryBudget], selects: "the plan's room comes from the driver's budget", ext: "VK_EXT_memory_budget"},
	}
}

func (c *Context) logRoster() {
	d := c.Info
	slog.Info("vulkan device", "index", d.Index, "name", d.Name, "type", d.Type, "driver", d.DriverName, "api", d.APIVersion)
	for _, cp := range c.capabilities() {
		slog.Info("vulkan capability", "cap", cp.name, "present", cp.present, "ext", cp.ext, "selects", cp.selects)
		if cp.fast && !cp.present {
			if _, seen := warnOnce.LoadOrStore(d.Key()+cp.ext, true); !seen {
				slog.Warn("vulkan fast tier absent", "ext", cp.ext, "effect", cp.absent)
			}
		}
	}
	slog.Info("vulkan capability", "cap", "subgroup size", "value", d.SubgroupSize)
	slog.Info("vulkan capability", "cap", "max storage buffer range", "mib", d.MaxStorageBufferRange>>20, "selects", "every binding and weight slice stays under it")
	slog.Info("vulkan capability", "cap", "max allocation size", "mib", d.MaxAllocationSize>>20, "selects", "memory blocks are allocated at most this large")
}

// ValidationErrors reports how many validation-layer errors this process has seen, the last
// message, and whether validation is active on this context.
func (c *Context) ValidationErrors() (n int, last string, active bool) {
	n, last = validationErrors()
	return n, last, c.inst.validate
}

// Close waits for the device to go idle and destroys everything made from the context.
func (c *Context) Close() error {
	if c == nil || c.closed {
		return nil
	}
	c.closed = true
	if n, last, active := c.ValidationErrors(); active && n > 0 {
		slog.Warn("vulkan validation errors", "count", n, "last", last)
	}
	if c.dev != nil {
		vk.DeviceWaitIdle(c.dev)
		for _, k := range c.kernels {
			k.destroy(c.dev)
		}
		if c.uploads != nil {
			c.EndUploads() // Close reports no error; a failed upload failed its load already
		}
		if c.staging != nil {
			c.staging.Free()
		}
		for _, p := range c.pools {
			p.destroy(c.dev)
		}
		if c.fence != vk.NullFence {
			vk.DestroyFence(c.dev, c.fence, nil)
		}
		if c.cmdPool != vk.NullCommandPool {
			vk.DestroyCommandPool(c.dev, c.cmdPool, nil)
		}
		vk.DestroyDevice(c.dev, nil)
	}
	c.inst.destroy()
	return nil
}

// memoryType returns a memory type index allowed by bits with all of want (and preferring
// also prefer), or an error.
func (c *Context) memoryType(bits uint32, want, prefer vk.MemoryPropertyFlagBits) (uint32, vk.MemoryPropertyFlagBits, error) {
	found := -1
	for i, mt := range c.memTypes {
		flags := vk.MemoryPropertyFlagBits(mt.PropertyFlags)
		if bits&(1<<uint(i)) == 0 || flags&want != want {
			continue
		}
		if found < 0 || (prefer != 0 && flags&prefer == prefer && vk.MemoryPropertyFlagBits(c.memTypes[found].PropertyFlags)&prefer != prefer) {
			found = i
		}
	}
	if found < 0 {
		return 0, 0, fmt.Errorf("no Vulkan memory type with flags %#x among %#x", uint32(want), bits)
	}
	return uint32(found), vk.MemoryPropertyFlagBits(c.memTypes[found].PropertyFlags), nil
}

// memPool is one kind of memory (device-local or host-visible) carved from blocks no larger
// than the device's maxMemoryAllocationSize.
type memPool struct {
	typeIndex uint32
	flags     vk.MemoryPropertyFlagBits
	blocks    []*memBlock
}

type memBlock struct {
	mem    vk.DeviceMemory
	size   uint64
	used   uint64
	live   int
	mapped unsafe.Pointer
}

func (p *memPool) destroy(dev vk.Device) {
	for _, b := range p.blocks {
		if b.mapped != nil {
			vk.UnmapMemory(dev, b.mem)
		}
		vk.FreeMemory(dev, b.mem, nil)
	}
	p.blocks = nil
}

// defaultBlock is the size of a fresh memory block: large enough that a model needs few,
// small enough to fit under every driver's allocation limit.
const defaultBlock = 256 << 20

// defaultHostBlock is the size of a fresh block of host memory (staging, readbacks): the
// driver pins and clears what it allocates, so a 256 MiB block for the upload's two 16 MiB
// staging halves cost an H200 host 57-65 ms of a 1B model's ~300 ms load.
const defaultHostBlock = 32 << 20

func alignUp(v, a uint64) uint64 { return (v + a - 1) / a * a }

// Buffer is a storage buffer bound to a slice of a memory block.
type Buffer struct {
	ctx    *Context
	handle vk.Buffer
	block  *memBlock
	offset uint64
	Size   uint64
	host   bool // mapped host-visible memory: read and written directly
}

// ErrTooLarge reports a buffer over the device's allocation or binding limits.
var ErrTooLarge = errors.New("buffer exceeds the device limit")

// ErrOutOfMemory reports a device-memory allocation the driver refused for want of memory
// (VK_ERROR_OUT_OF_DEVICE_MEMORY or VK_ERROR_OUT_OF_HOST_MEMORY).
var ErrOutOfMemory = errors.New("the GPU ran out of memory")

// allocFault, when set, is asked before every buffer is made and fails it with the error it
// returns: tests simulate a driver running out of memory at a chosen point of an upload (a
// small model fits one pooled allocation, so the fault sits at the buffer, not the block).
var allocFault func(bytes uint64) error

// SetAllocFault installs f as the buffer-allocation fault of every context (nil removes it)
// and returns the previous one. For tests of what callers do when an upload runs out of memory.
func SetAllocFault(f func(bytes uint64) error) func(bytes uint64) error {
	prev := allocFault
	allocFault = f
	return prev
}

// NewBuffer makes a storage buffer of size bytes; host asks for host-visible memory
// (staging, small readbacks), else device-local memory (mapped too when the device's
// device-local memory is host-visible).
func (c *Context) NewBuffer(size uint64, host bool) (*Buffer, error) {
	if size == 0 {
		size = 4
	}
	size = alignUp(size, 4)
	if size > c.Info.MaxAllocationSize {
		return nil, fmt.Errorf("buffer of %d bytes over maxMemoryAllocationSize %d: %w", size, c.Info.MaxAllocationSize, ErrTooLarge)
	}
	if allocFault != nil {
		if err := allocFault(size); err != nil {
			return nil, fmt.Errorf("buffer of %d bytes: %w", size, err)
		}
	}
	var h vk.Buffer
	usage := vk.BufferUsageStorageBufferBit | vk.BufferUsageTransferSrcBit | vk.BufferUsageTransferDstBit
	if r := vk.CreateBuffer(c.dev, &vk.BufferCreateInfo{
		SType:       vk.StructureTypeBufferCreateInfo,
		Size:        vk.DeviceSize(size),
		Usage:       vk.BufferUsageFlags(usage),
		SharingMode: vk.SharingModeExclusive,
	}, nil, &h); r != vk.Success {
		return nil, fmt.Errorf("create buffer of %d bytes: %w", size, resultError(r))
	}
	var req vk.MemoryRequirements
	vk.GetBufferMemoryRequirements(c.dev, h, &req)
	req.Deref()
	// Device buffers take the first device-local type (the driver lists its best first; on a
	// discrete GPU without resizable BAR a host-visible device-local type is a 256 MiB window
	// that weights must not fill). UMA devices' device-local memory is mapped anyway.
	want := vk.MemoryPropertyDeviceLocalBit
	prefer := vk.MemoryPropertyFlagBits(0)
	if host {
		want = vk.MemoryPropertyHostVisibleBit | vk.MemoryPropertyHostCoherentBit
		prefer = vk.MemoryPropertyHostCachedBit
	}
	ti, flags, err := c.memoryType(req.MemoryTypeBits, want, prefer)
	if err != nil {
		vk.DestroyBuffer(c.dev, h, nil)
		return nil, err
	}
	block, off, err := c.suballocate(ti, flags, uint64(req.Size), uint64(req.Alignment))
	if err != nil {
		vk.DestroyBuffer(c.dev, h, nil)
		return nil, err
	}
	if r := vk.BindBufferMemory(c.dev, h, block.mem, vk.DeviceSize(off)); r != vk.Success {
		vk.DestroyBuffer(c.dev, h, nil)
		return nil, fmt.Errorf("bind buffer memory: %w", resultError(r))
	}
	block.live++
	return &Buffer{ctx: c, handle: h, block: block, offset: off, Size: size, host: block.mapped != nil}, nil
}

func (c *Context) suballocate(ti uint32, flags vk.MemoryPropertyFlagBits, size, align uint64) (*memBlock, uint64, error) {
	var pool *memPool
	for _, p := range c.pools {
		if p.typeIndex == ti {
			pool = p
		}
	}
	if pool == nil {
		pool = &memPool{typeIndex: ti, flags: flags}
		c.pools = append(c.pools, pool)
	}
	for _, b := range pool.blocks {
		off := alignUp(b.used, align)
		if off+size <= b.size {
			b.used = off + size
			return b, off, nil
		}
	}
	bs := uint64(defaultBlock)
	if flags&vk.MemoryPropertyHostVisibleBit != 0 && flags&vk.MemoryPropertyDeviceLocalBit == 0 {
		bs = defaultHostBlock
	}
	if size > bs {
		bs = size
	}
	if bs > c.Info.MaxAllocationSize {
		bs = c.Info.MaxAllocationSize
	}
	var mem vk.DeviceMemory
	if r := vk.AllocateMemory(c.dev, &vk.MemoryAllocateInfo{
		SType:           vk.StructureTypeMemoryAllocateInfo,
		AllocationSize:  vk.DeviceSize(bs),
		MemoryTypeIndex: ti,
	}, nil, &mem); r != vk.Success {
		if r == vk.ErrorOutOfDeviceMemory || r == vk.ErrorOutOfHostMemory {
			return nil, 0, fmt.Errorf("allocate %d MiB of device memory (type %d): %w (%w)", bs>>20, ti, ErrOutOfMemory, resultError(r))
		}
		return nil, 0, fmt.Errorf("allocate %d MiB of device memory (type %d): %w", bs>>20, ti, resultError(r))
	}
	b := &memBlock{mem: mem, size: bs, used: size}
	if flags&vk.MemoryPropertyHostVisibleBit != 0 && flags&vk.MemoryPropertyHostCoherentBit != 0 {
		var p unsafe.Pointer
		if r := vk.MapMemory(c.dev, mem, 0, vk.DeviceSize(bs), 0, &p); r == vk.Success {
			b.mapped = p
		}
	}
	pool.blocks = append(pool.blocks, b)
	return b, 0, nil
}

// Free destroys the buffer; its block is released when every buffer in it is freed.
func (b *Buffer) Free() {
	if b == nil || b.handle == vk.NullBuffer {
		return
	}
	c := b.ctx
	vk.DestroyBuffer(c.dev, b.handle, nil)
	b.handle = vk.NullBuffer
	b.block.live--
	if b.block.live == 0 {
		b.block.used = 0
	}
}

// bytes returns the mapped bytes of a host-visible buffer.
func (b *Buffer) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Add(b.block.mapped, b.offset)), b.Size)
}

// Write copies data into the buffer at off (through the staging buffer when the buffer is
// not host-visible).
func (b *Buffer) Write(off uint64, data []byte) error {
	if off+uint64(len(data)) > b.Size {
		return fmt.Errorf("write %d bytes at %d into a %d-byte buffer: out of range", len(data), off, b.Size)
	}
	if b.host {
		copy(b.bytes()[off:], data)
		return nil
	}
	c := b.ctx
	if c.uploads != nil {
		return c.uploads.write(c, b, off, data)
	}
	const chunk = 64 << 20
	for done := 0; done < len(data); {
		n := len(data) - done
		if n > chunk {
			n = chunk
		}
		st, err := c.stagingBuffer(uint64(n))
		if err != nil {
			return err
		}
		parallelCopy(st.bytes(), data[done:done+n])
		if err := c.copyNow(st, 0, b, off+uint64(done), uint64(n)); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// Read copies n bytes at off out of the buffer.
func (b *Buffer) Read(off, n uint64) ([]byte, error) {
	out := make([]byte, n)
	if err := b.readInto(off, out); err != nil {
		return nil, err
	}
	return out, nil
}

// readInto copies len(dst) bytes at off out of the buffer into dst: straight from the mapping
// of a host-visible buffer, through the staging buffer otherwise.
func (b *Buffer) readInto(off uint64, dst []byte) error {
	n := uint64(len(dst))
	if off+n > b.Size {
		return fmt.Errorf("read %d bytes at %d from a %d-byte buffer: out of range", n, off, b.Size)
	}
	if err := b.ctx.drainUploads(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if b.host {
		copy(dst, b.bytes()[off:off+n])
		return nil
	}
	c := b.ctx
	st, err := c.stagingBuffer(n)
	if err != nil {
		return err
	}
	if err := c.copyNow(b, off, st, 0, n); err != nil {
		return err
	}
	copy(dst, st.bytes()[:n])
	return nil
}

func (c *Context) stagingBuffer(n uint64) (*Buffer, error) {
	if c.staging != nil && c.staging.Size >= n {
		return c.staging, nil
	}
	if c.staging != nil {
		c.staging.Free()
	}
	size := alignUp(n, 1<<20)
	st, err := c.NewBuffer(size, true)
	if err != nil {
		return nil, fmt.Errorf("staging buffer: %w", err)
	}
	c.staging = st
	return st, nil
}

// parallelCopy copies src into dst (len(dst) >= len(src)) on several goroutines when it is
// large: a model's weights come from a memory-mapped file, and the page faults of a cold
// mapping and the copy itself are CPU work that one core does at a few GB/s. Pieces of 512 KiB:
// a 1B model's tensors are 0.6-9 MiB, and with 4 MiB pieces most of them went up on one core
// (its upload's copies ran at 6 GB/s where the 8B's ran at 9).
func parallelCopy(dst, src []byte) {
	const piece = 512 << 10
	workers := min(runtime.GOMAXPROCS(0), 8, len(src)/piece)
	if workers < 2 {
		copy(dst, src)
		return
	}
	per := (len(src) + workers - 1) / workers
	var wg sync.WaitGroup
	for i := 0; i < len(src); i += per {
		j := min(i+per, len(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[i:j], src[i:j])
		}()
	}
	wg.Wait()
}

// copyNow records and runs one buffer copy.
func (c *Context) copyNow(src *Buffer, srcOff uint64, dst *Buffer, dstOff, n uint64) error {
	s, err := c.NewSeq()
	if err != nil {
		return err
	}
	defer s.Free()
	s.Copy(src, srcOff, dst, dstOff, n)
	return s.Run()
}

// WriteF32 writes float32 values at element offset off.
func (b *Buffer) WriteF32(off int, v []float32) error {
	return b.Write(uint64(4*off), f32Bytes(v))
}

// ReadF32 reads n float32 values at element offset off.
func (b *Buffer) ReadF32(off, n int) ([]float32, error) {
	out := make([]float32, n)
	if err := b.readInto(uint64(4*off), f32Bytes(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteU32 writes uint32 values at element offset off.
func (b *Buffer) WriteU32(off int, v []uint32) error {
	if len(v) == 0 {
		return nil
	}
	return b.Write(uint64(4*off), unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)))
}

// ReadU32 reads n uint32 values at element offset off.
func (b *Buffer) ReadU32(off, n int) ([]uint32, error) {
	out := make([]uint32, n)
	if n > 0 {
		if err := b.readInto(uint64(4*off), unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 4*n)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}
