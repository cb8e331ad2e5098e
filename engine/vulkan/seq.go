package vulkan

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"

	"github.com/vkllm/vkllm/shaders"
)

// Kernel is a compute pipeline made from one embedded SPIR-V module, with n storage-buffer
// bindings (set 0, bindings 0..n-1) and a push-constant block.
type Kernel struct {
	Name      string
	bindings  int
	pushBytes int
	module    vk.ShaderModule
	setLayout vk.DescriptorSetLayout
	layout    vk.PipelineLayout
	pipeline  vk.Pipeline
}

func (k *Kernel) destroy(dev vk.Device) {
	vk.DestroyPipeline(dev, k.pipeline, nil)
	vk.DestroyPipelineLayout(dev, k.layout, nil)
	vk.DestroyDescriptorSetLayout(dev, k.setLayout, nil)
	vk.DestroyShaderModule(dev, k.module, nil)
}

// Kernel returns the pipeline of the embedded shader name (cached per context). It may be
// called from several goroutines (precompile's workers beside a recording): a kernel another
// goroutine is making is waited for, not made twice.
func (c *Context) Kernel(name string, bindings, pushBytes int) (*Kernel, error) {
	for {
		c.kernelMu.Lock()
		if k, ok := c.kernels[name]; ok {
			c.kernelMu.Unlock()
			if k.bindings != bindings || k.pushBytes != pushBytes {
				return nil, fmt.Errorf("kernel %q asked with %d bindings/%d push bytes, made with %d/%d", name, bindings, pushBytes, k.bindings, k.pushBytes)
			}
			return k, nil
		}
		if making, ok := c.making[name]; ok {
			c.kernelMu.Unlock()
			<-making // then found, or asked again where that attempt failed
			continue
		}
		if c.making == nil {
			c.making = map[string]chan struct{}{}
		}
		making := make(chan struct{})
		c.making[name] = making
		c.kernelMu.Unlock()
		k, err := c.makeKernel(name, bindings, pushBytes)
		c.kernelMu.Lock()
		if err == nil {
			c.kernels[name] = k
		}
		delete(c.making, name)
		close(making)
		c.kernelMu.Unlock()
		return k, err
	}
}

// makeKernel creates the pipeline of the embedded shader name.
func (c *Context) makeKernel(name string, bindings, pushBytes int) (*Kernel, error) {
	code, err := shaders.SPIRV(name)
	if err != nil {
		return nil, err
	}
	if len(code)%4 != 0 {
		return nil, fmt.Errorf("shader %q: SPIR-V of %d bytes is not whole words", name, len(code))
	}
	words := make([]uint32, len(code)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(code[4*i:])
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	k := &Kernel{Name: name, bindings: bindings, pushBytes: pushBytes}
	pin.Pin(&words[0])
	var moduleOut vk.ShaderModule
	if r := vk.CreateShaderModule(c.dev, &vk.ShaderModuleCreateInfo{
		SType:    vk.StructureTypeShaderModuleCreateInfo,
		CodeSize: uint(len(code)),
		PCode:    words,
	}, nil, &moduleOut); r != vk.Success {
		return nil, fmt.Errorf("create shader module %q: %w", name, resultError(r))
	}
	k.module = moduleOut
	if bindings > maxBindings {
		vk.DestroyShaderModule(c.dev, k.module, nil)
		return nil, fmt.Errorf("kernel %q has %d bindings, at most %d supported", name, bindings, maxBindings)
	}
	setLayout, layout, r := createStorageLayout(c.dev, bindings, pushBytes)
	if r != vk.Success {
		if setLayout != vk.NullDescriptorSetLayout {
			vk.DestroyDescriptorSetLayout(c.dev, setLayout, nil)
		}
		vk.DestroyShaderModule(c.dev, k.module, nil)
		return nil, fmt.Errorf("create the descriptor set and pipeline layouts for %q: %w", name, resultError(r))
	}
	k.setLayout, k.layout = setLayout, layout
	pipeline, r := createComputePipeline(c.dev, k.module, k.layout)
	if r != vk.Success {
		vk.DestroyPipelineLayout(c.dev, k.layout, nil)
		vk.DestroyDescriptorSetLayout(c.dev, k.setLayout, nil)
		vk.DestroyShaderModule(c.dev, k.module, nil)
		return nil, fmt.Errorf("create compute pipeline %q: %w", name, resultError(r))
	}
	k.pipeline = pipeline
	return k, nil
}

// Binding is a range of a buffer bound to one shader binding.
type Binding struct {
	Buf  *Buffer
	Off  uint64
	Size uint64
}

// All binds the whole buffer.
func (b *Buffer) All() Binding { return Binding{Buf: b, Size: b.Size} }

// Range binds size bytes at off.
func (b *Buffer) Range(off, size uint64) Binding { return Binding{Buf: b, Off: off, Size: size} }

// Push packs push constants: uint32, int, int32, float32 and bool (1 or 0) values, 4 bytes
// each.
func Push(vals ...any) []byte {
	out := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		var w uint32
		switch x := v.(type) {
		case uint32:
			w = x
		case int:
			w = uint32(int32(x))
		case int32:
			w = uint32(x)
		case float32:
			w = math.Float32bits(x)
		case bool:
			if x {
				w = 1
			}
		default:
			panic(fmt.Sprintf("vulkan.Push: unsupported %T", v))
		}
		out = binary.LittleEndian.AppendUint32(out, w)
	}
	return out
}

// Seq is a recorded command buffer: dispatches, barriers and copies, run once or replayed.
type Seq struct {
	c        *Context
	cmd      vk.CommandBuffer
	pools    []vk.DescriptorPool
	setsLeft int
	ended    bool
	err      error

	barriers int // barriers recorded so far
	span     int // the causal span of the prefill window being recorded (first position + rows; 0: unknown)

	queries  vk.QueryPool
	nQueries uint32
	labels   []string

	wants map[string]kernelShape // a dry recording's collection of the kernels asked for (precompile.go); nil otherwise
}

const setsPerPool = 256

// maxBindings is the most storage buffers one kernel binds (calls.go's VKLC_MAX_BINDINGS).
const maxBindings = 12

// NewSeq begins a command buffer.
func (c *Context) NewSeq() (*Seq, error) {
	cmds := make([]vk.CommandBuffer, 1)
	if r := vk.AllocateCommandBuffers(c.dev, &vk.CommandBufferAllocateInfo{
		SType:              vk.StructureTypeCommandBufferAllocateInfo,
		CommandPool:        c.cmdPool,
		Level:              vk.CommandBufferLevelPrimary,
		CommandBufferCount: 1,
	}, cmds); r != vk.Success {
		return nil, fmt.Errorf("allocate command buffer: %w", resultError(r))
	}
	s := &Seq{c: c, cmd: cmds[0]}
	if r := vk.BeginCommandBuffer(s.cmd, &vk.CommandBufferBeginInfo{SType: vk.StructureTypeCommandBufferBeginInfo}); r != vk.Success {
		s.Free()
		return nil, fmt.Errorf("begin command buffer: %w", resultError(r))
	}
	return s, nil
}

func (s *Seq) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *Seq) allocSet(k *Kernel) (vk.DescriptorSet, error) {
	c := s.c
	if s.setsLeft == 0 {
		pool, r := createStoragePool(c.dev, setsPerPool, setsPerPool*maxBindings)
		if r != vk.Success {
			return vk.NullDescriptorSet, fmt.Errorf("create descriptor pool: %w", resultError(r))
		}
		s.pools = append(s.pools, pool)
		s.setsLeft = setsPerPool
	}
	set, r := allocateSet(c.dev, s.pools[len(s.pools)-1], k.setLayout)
	if r != vk.Success {
		return vk.NullDescriptorSet, fmt.Errorf("allocate descriptor set: %w", resultError(r))
	}
	s.setsLeft--
	return set, nil
}

// Dispatch records kernel k over groups workgroups with the given push constants and
// bindings (one per shader binding, in order).
func (s *Seq) Dispatch(k *Kernel, push []byte, gx, gy, gz uint32, binds ...Binding) {
	if s.err != nil {
		return
	}
	c := s.c
	if len(binds) != k.bindings {
		s.fail(fmt.Errorf("kernel %q takes %d bindings, got %d", k.Name, k.bindings, len(binds)))
		return
	}
	if len(push) != k.pushBytes {
		s.fail(fmt.Errorf("kernel %q takes %d push-constant bytes, got %d", k.Name, k.pushBytes, len(push)))
		return
	}
	if gx == 0 || gy == 0 || gz == 0 {
		return
	}
	set, err := s.allocSet(k)
	if err != nil {
		s.fail(err)
		return
	}
	ranges := make([]storageRange, len(binds))
	for i, b := range binds {
		size := b.Size
		if size == 0 {
			size = b.Buf.Size - b.Off
		}
		if b.Off+size > b.Buf.Size {
			s.fail(fmt.Errorf("kernel %q binding %d: range %d+%d past a %d-byte buffer", k.Name, i, b.Off, size, b.Buf.Size))
			return
		}
		if size > c.Info.MaxStorageBufferRange {
			s.fail(fmt.Errorf("kernel %q binding %d: %d bytes over maxStorageBufferRange %d: %w", k.Name, i, size, c.Info.MaxStorageBufferRange, ErrTooLarge))
			return
		}
		if b.Off%c.minOffsetAlign != 0 {
			s.fail(fmt.Errorf("kernel %q binding %d: offset %d not a multiple of minStorageBufferOffsetAlignment %d", k.Name, i, b.Off, c.minOffsetAlign))
			return
		}
		ranges[i] = storageRange{buf: b.Buf.handle, off: b.Off, bytes: size}
	}
	if err := bindStorage(c.dev, s.cmd, k, set, ranges); err != nil {
		s.fail(err)
		return
	}
	if len(push) > 0 {
		vk.CmdPushConstants(s.cmd, k.layout, vk.ShaderStageFlags(vk.ShaderStageComputeBit), 0, uint32(len(push)), unsafe.Pointer(&push[0]))
	}
	vk.CmdDispatch(s.cmd, gx, gy, gz)
}

// Barrier makes every earlier shader or transfer write visible to every later read.
func (s *Seq) Barrier() {
	s.barriers++
	if s.err != nil {
		return
	}
	cmdBarrier(s.cmd)
}

// Copy records a buffer-to-buffer copy of n bytes.
func (s *Seq) Copy(src *Buffer, srcOff uint64, dst *Buffer, dstOff, n uint64) {
	if s.err != nil {
		return
	}
	cmdCopy(s.cmd, src.handle, dst.handle, srcOff, dstOff, n)
}

// EnableTimestamps reserves n timestamp queries for Stamp (no-op when the queue has none).
func (s *Seq) EnableTimestamps(n int) error {
	if s.c.timestampNs == 0 || n == 0 {
		return nil
	}
	var qp vk.QueryPool
	if r := vk.CreateQueryPool(s.c.dev, &vk.QueryPoolCreateInfo{
		SType:      vk.StructureTypeQueryPoolCreateInfo,
		QueryType:  vk.QueryTypeTimestamp,
		QueryCount: uint32(n),
	}, nil, &qp); r != vk.Success {
		return fmt.Errorf("create timestamp query pool: %w", resultError(r))
	}
	s.queries = qp
	s.nQueries = uint32(n)
	vk.CmdResetQueryPool(s.cmd, s.queries, 0, uint32(n))
	return nil
}

// Stamp records a timestamp labelled label after all earlier work.
func (s *Seq) Stamp(label string) {
	if s.err != nil || s.nQueries == 0 || uint32(len(s.labels)) >= s.nQueries {
		return
	}
	vk.CmdWriteTimestamp(s.cmd, vk.PipelineStageBottomOfPipeBit, s.queries, uint32(len(s.labels)))
	s.labels = append(s.labels, label)
}

// Timings returns the nanoseconds between consecutive stamps of the last run, keyed by the
// later stamp's label (summed when a label repeats).
func (s *Seq) Timings() (map[string]float64, error) {
	if len(s.labels) < 2 {
		return nil, nil
	}
	ts := make([]uint64, len(s.labels))
	if r := vk.GetQueryPoolResults(s.c.dev, s.queries, 0, uint32(len(ts)), uint(8*len(ts)), unsafe.Pointer(&ts[0]), 8,
		vk.QueryResultFlags(vk.QueryResult64Bit|vk.QueryResultWaitBit)); r != vk.Success {
		return nil, fmt.Errorf("read timestamps: %w", resultError(r))
	}
	out := map[string]float64{}
	for i := 1; i < len(ts); i++ {
		out[s.labels[i]] += float64(ts[i]-ts[i-1]) * s.c.timestampNs
	}
	return out, nil
}

// End finishes recording; Run calls it when needed.
func (s *Seq) End() error {
	if s.ended {
		return s.err
	}
	s.ended = true
	if r := vk.EndCommandBuffer(s.cmd); r != vk.Success {
		s.fail(fmt.Errorf("end command buffer: %w", resultError(r)))
	}
	return s.err
}

// Run submits the sequence and waits for it to finish. A sequence may be run many times.
func (s *Seq) Run() error {
	if err := s.Submit(s.c.fence); err != nil {
		return err
	}
	return s.c.waitFence(s.c.fence)
}

// Submit queues the sequence without waiting; fence signals when it has run (waitFence).
func (s *Seq) Submit(fence vk.Fence) error {
	if err := s.End(); err != nil {
		return err
	}
	c := s.c
	if err := c.drainUploads(); err != nil { // batched writes land before the work reads them
		return err
	}
	if r := queueSubmit(c.queue, s.cmd, fence); r != vk.Success {
		return fmt.Errorf("submit command buffer: %w", resultError(r))
	}
	return nil
}

// waitFence waits for fence and resets it.
func (c *Context) waitFence(fence vk.Fence) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	fences := []vk.Fence{fence}
	pin.Pin(&fences[0])
	if r := vk.WaitForFences(c.dev, 1, fences, vk.True, math.MaxUint64); r != vk.Success {
		return fmt.Errorf("wait for the GPU: %w", resultError(r))
	}
	if r := vk.ResetFences(c.dev, 1, fences); r != vk.Success {
		return fmt.Errorf("reset fence: %w", resultError(r))
	}
	return nil
}

// Free releases the command buffer, its descriptor sets and its queries.
func (s *Seq) Free() {
	c := s.c
	if s.cmd != nil {
		vk.FreeCommandBuffers(c.dev, c.cmdPool, 1, []vk.CommandBuffer{s.cmd})
		s.cmd = nil
	}
	for _, p := range s.pools {
		vk.DestroyDescriptorPool(c.dev, p, nil)
	}
	s.pools = nil
	if s.nQueries > 0 {
		vk.DestroyQueryPool(c.dev, s.queries, nil)
		s.nQueries = 0
	}
}
