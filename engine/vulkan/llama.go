package vulkan

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/quant"
)

// Window is the most prompt rows one prefill pass evaluates.
const Window = 512

// weightAlign rounds every weight buffer the way the resident plan counts it
// (plan.UploadAlign), so the plan's weight bytes are the bytes the driver allocates.
const weightAlign = 256

// ErrUnsupported marks a model the resident driver cannot run (the caller falls back).
var ErrUnsupported = errors.New("not supported by the Vulkan driver")

// weight is a matrix resident on the device, split by rows into slices that each fit one
// storage-buffer binding.
type weight struct {
	name   string
	typ    quant.Type
	rows   int
	cols   int
	slices []weightSlice
	conv   *convEnd // the DeltaNet's qkv weight: its convolution, for the decode product's end (endsWithConv)
}

type weightSlice struct {
	buf  *Buffer
	row0 int
	rows int
}

// vector is a float32 vector resident on the device.
type vector struct{ buf *Buffer }

type layerWeights struct {
	attnNorm, ffnNorm   vector
	qBias, kBias, vBias vector // qwen2 (nil buffers otherwise)
	qNorm, kNorm        vector // qwen3: per-head RMSNorm weights (nil buffers otherwise)
	q, k, v, o          weight
	gate, up, down      weight           // the dense FFN (none for a mixture of experts)
	moe                 *moeWeights      // the mixture-of-experts FFN (qwen2moe, qwen3moe); nil for a dense one
	dn                  *deltaNetWeights // a Gated DeltaNet block in place of attention (qwen35, qwen35moe); nil otherwise
	kCache, vCache      *Buffer          // nil for a DeltaNet layer
}

// Resident is the whole-model resident forward pass of a llama, qwen2, qwen3, qwen2moe,
// qwen3moe, qwen35 or qwen35moe model (residentArchs): every
// weight uploaded in its GGUF layout, the KV cache in f16 on the device and scratch sized once
// for a Window-row prefill. Decode replays one pre-recorded command buffer per token with the
// token and position in device-visible buffers. It implements model.Runner and is not safe for
// concurrent use.
type Resident struct {
	c      *Context
	h      model.Hyperparameters
	arch   residentArch // the architecture's layer (arch_*.go)
	ctxLen int
	rows   int // scratch rows (Window, or less for short contexts)
	// routing (ResidentOptions.CaptureRouting) holds each mixture-of-experts layer's selected
	// ids for r.rows rows; routed counts the layers a recording has copied there so far.
	routing  *Buffer
	routed   int
	captures bool // ResidentOptions.CaptureRouting
	lastRows int  // rows of the last pass run

	tokEmbd weight
	output  weight
	outNorm vector
	layers  []layerWeights

	// scratch, token-major
	x, xn, q, k, v, att, gate, up *Buffer
	attPart                       *Buffer // split attention's per-range partials (fast tier; nil on the exact tier)
	xq                            *Buffer // activations rounded for quantized weights
	convEnded                     bool    // projectX8 ended a DeltaNet qkv product as ssm_conv (deltaNet then records no ssm_conv)
	headRoundsNorm                bool    // the recording's one-token head rounds RMSNorm(x)·output_norm itself (record left r.xn unwritten)
	argParts                      *Buffer // ArgmaxWide's per-workgroup bests
	argArrivals                   *Buffer // ArgmaxWide's count of finished workgroups (0 between dispatches)
	// logitsDev holds a decode step's logits in device memory (VKLLM_GPU_DEVICE_LOGITS; nil
	// otherwise); headOut is where the head being recorded writes (nil: r.logits)
	logitsDev, headOut  *Buffer
	stage               *Buffer             // fp16 weight rows for the cm2 F16 kernel, two halves (nil unless the context stages, usesCM2Staging; staging.go)
	stagePlans          map[int][]stageStep // per window size: its stagings in order (plannedStagings)
	precompiling        sync.WaitGroup      // the background making of the prompt windows' kernels (precompileWindows)
	precompileStop      atomic.Bool         // asks it to end (Close)
	stagePlan           []stageStep         // the plan the current recording replays (nil: none)
	stageRec            *[]stageStep        // where a dry recording collects the stagings
	stageAt, stageReady int                 // the current recording's next staging; the one recorded ahead (-1: none)
	stageReadyBarrier   int                 // the Seq's barrier count when that one was recorded
	windowEnd           int                 // the last pass's first position plus its rows (setPositions)
	moe                 moeScratch          // a mixture of experts' routing (nil buffers for a dense model)
	dn                  deltaScratch        // the Gated-DeltaNet hybrids' (nil buffers for other models)
	logits              *Buffer             // host-visible: rows × vocab
	logitRows           int
	ids, pos, best      *Buffer // host-visible
	ropeCS              *Buffer // host-visible: rows × ropeDims/2 (cos, sin) pairs
	ropeTab             []float32
	ropeDims            int
	ropeScale           float32
	ropeStill           []bool // M-RoPE's pairs that text keeps at position 0 (qwen35); nil: none

	// the tokens the recurrent layers' state has folded in, and whether that state is unknown
	// (never cleared, or a pass failed); see rewindTo
	history  []int
	stale    bool
	snaps    [snapshotSlots]stateSnapshot // what the DeltaNet layers' snapshot slots hold
	replayed int                          // tokens the latest rewind evaluated again

	decode  *Seq          // the pre-recorded single-token pass
	chain   *decodeChain  // greedy steps queued one ahead (chain.go; nil until the first)
	sampled *decodeChain  // sampled steps queued one ahead (sample.go; nil until the first)
	drawing *sampleInputs // while a sampled chain's slot is recorded: the step ends in sample_token, not the argmax
	closed  bool
	ownCtx  bool

	// A part of the model (ResidentOptions.Part): the pass starts from the hidden states in hin
	// at layer first, and without the head ends with the hidden states in hout.
	part     bool
	first    int
	hasHead  bool
	hin      *Buffer // host-visible: rows × dim hidden states in
	hout     *Buffer // host-visible: rows × dim hidden states out (no head)
	warmed   bool
	onWarmup func(after DeviceInfo)

	// allocated bytes by kind, for the plan comparison
	Bytes ResidentBytes

	prof    bool
	profTok int
	profSum map[string]float64
}

// ResidentBytes is what the driver allocated on the device, by kind.
type ResidentBytes struct {
	Weights uint64 // every weight buffer, Layers and Head included
	KV      uint64
	Scratch uint64
	Layers  uint64 // the blocks' weights (blk.N.*)
	Head    uint64 // final norm and output head (the embedding table when tied), 0 without them
	// Recurrent is the Gated DeltaNet layers' state (also counted in Scratch), the plan's
	// Scratch.RecurrentState.
	Recurrent uint64
}

// ResidentOptions tunes NewResident.
type ResidentOptions struct {
	Context int // positions of the KV cache; 0: the model's context length
	// OwnContext makes Close also close the Context (for a runner handed to the engine).
	OwnContext bool
	// Window is the most rows one prefill pass takes; 0: the package Window (512).
	Window int
	// Part, when set, makes the runner hold only part of the model (the GPU side of a split).
	Part *Part
	// AfterWarmup is called once, after the first decode pass has run (every resident buffer
	// then exists and has been touched), with the device's facts re-read then: the caller
	// compares the budget and usage with its plan.
	AfterWarmup func(after DeviceInfo)
	// CaptureRouting keeps every mixture-of-experts layer's choice of experts for the rows of
	// the last pass, for Routing (a diagnostic: tests compare the device's routing with the
	// CPU's). Its buffer is not part of the plan's scratch.
	CaptureRouting bool
}

// Part is the GPU side of a split: layers FirstLayer.. of the model resident with their KV
// cache, fed hidden states by the caller (EvalHidden) instead of tokens; the final norm and the
// output head are resident too when Head, else the pass ends with the hidden states and the
// caller applies them. The token embedding table stays with the caller (unless it is the tied
// output head).
type Part struct {
	FirstLayer int
	Head       bool
}

// CheckModel reports whether the resident driver can run m, with the reason when not.
func CheckModel(m *model.Model) error {
	h := m.Hyper
	arch, ok := residentArchs[h.Arch]
	if !ok {
		names := slices.Sorted(maps.Keys(residentArchs))
		return fmt.Errorf("architecture %q: %w (%s only)", h.Arch, ErrUnsupported, strings.Join(names, ", "))
	}
	if h.HeadDim > 256 || h.HeadDim%2 != 0 || h.ValueDim != h.HeadDim {
		return fmt.Errorf("head size %d/%d: %w (even, at most 256, keys and values alike)", h.HeadDim, h.ValueDim, ErrUnsupported)
	}
	if h.HeadsKV == 0 || h.Heads%h.HeadsKV != 0 {
		return fmt.Errorf("%d heads over %d KV heads: %w", h.Heads, h.HeadsKV, ErrUnsupported)
	}
	if h.Dim%4 != 0 {
		return fmt.Errorf("embedding length %d: %w (must be a multiple of 4)", h.Dim, ErrUnsupported)
	}
	if err := checkMoE(m); err != nil {
		return err
	}
	if err := checkHybrid(m); err != nil {
		return err
	}
	mats := []model.Matrix{m.TokenEmbd, m.Output}
	for _, l := range m.Layers {
		if l.DeltaNet != nil {
			mats = append(mats, deltaNetMatrices(l)...)
		} else {
			mats = append(mats, l.Q, l.K, l.V, l.O)
		}
		if l.MoE == nil {
			mats = append(mats, l.Gate, l.Up, l.Down)
		}
		mats = append(mats, moeMatrices(l)...)
	}
	for i := range m.Layers {
		if arch.vectors == nil {
			break
		}
		for _, v := range arch.vectors(h, &m.Layers[i], &layerWeights{}) {
			if v.optional && v.src.Values == nil {
				continue
			}
			if len(v.src.Values) != v.n {
				return fmt.Errorf("layer %d: vector %q has %d values, want %d: %w", i, v.src.Name, len(v.src.Values), v.n, ErrUnsupported)
			}
		}
	}
	for _, w := range mats {
		if !SupportsWeight(w.Type) {
			return fmt.Errorf("tensor %q of type %v: %w (the Vulkan kernels read %s: requantize it to one of those, or run on the CPU)", w.Name, w.Type, ErrUnsupported, SupportedWeightNames())
		}
		if w.Cols%blockElems(w.Type) != 0 {
			return fmt.Errorf("tensor %q: rows of %d elements are not whole %d-element units: %w", w.Name, w.Cols, blockElems(w.Type), ErrUnsupported)
		}
	}
	return nil
}

// NewResident uploads m to the context's device. The context stays owned by the caller
// (Close does not close it).
func NewResident(c *Context, m *model.Model, opts ResidentOptions) (*Resident, error) {
	if err := CheckModel(m); err != nil {
		return nil, err
	}
	h := m.Hyper
	ctxLen := opts.Context
	if ctxLen <= 0 {
		ctxLen = h.ContextLength
	}
	if ctxLen <= 0 {
		return nil, fmt.Errorf("resident driver: context length %d is not positive", ctxLen)
	}
	kvRowBytes := uint64(h.KDim() * 2)
	if maxCtx := c.Info.MaxStorageBufferRange / kvRowBytes; uint64(ctxLen) > maxCtx {
		return nil, fmt.Errorf("resident driver: context %d needs a %d-byte KV binding per layer, over maxStorageBufferRange %d (at most %d positions): %w",
			ctxLen, uint64(ctxLen)*kvRowBytes, c.Info.MaxStorageBufferRange, maxCtx, ErrTooLarge)
	}
	r := &Resident{c: c, h: h, arch: residentArchs[h.Arch], ctxLen: ctxLen, prof: config.GPUProf.Bool(), ownCtx: opts.OwnContext,
		hasHead: true, onWarmup: opts.AfterWarmup, ropeDims: h.Rope.Dims, ropeScale: h.Rope.FreqScale, captures: opts.CaptureRouting}
	if r.ropeDims == 0 {
		r.ropeDims = h.HeadDim
	}
	if r.ropeScale == 0 {
		r.ropeScale = 1
	}
	if h.Rope.Sections != [4]int{} {
		r.ropeStill = make([]bool, r.ropeDims/2)
		for i := range r.ropeStill {
			r.ropeStill[i] = h.Rope.StillPair(i)
		}
	}
	r.stale = len(h.Recurrent) > 0 // the state buffers start undefined
	if p := opts.Part; p != nil {
		if len(h.Recurrent) > 0 {
			// a part's runner takes hidden states and has no token history to rewind its state by
			return nil, fmt.Errorf("architecture %q: a recurrent (Gated DeltaNet) stack cannot be split between the CPU and the GPU: %w", h.Arch, ErrUnsupported)
		}
		if p.FirstLayer < 0 || p.FirstLayer >= h.Layers {
			return nil, fmt.Errorf("resident driver: first GPU layer %d outside the model's %d layers", p.FirstLayer, h.Layers)
		}
		r.part, r.first, r.hasHead = true, p.FirstLayer, p.Head
	}
	ok := false
	defer func() {
		if !ok {
			r.Close()
		}
	}()
	started := time.Now()
	// Weights go up in batches (upload.go); a failed load ends the batch before Close frees
	// the buffers its copies target.
	if err := c.BeginUploads(); err != nil {
		return nil, err
	}
	staged := time.Now()
	uploading := true
	defer func() {
		if uploading {
			c.EndUploads()
		}
	}()
	var err error
	if !r.part {
		if r.tokEmbd, err = r.uploadMatrix(m.TokenEmbd); err != nil {
			return nil, err
		}
	}
	if r.hasHead {
		w0 := r.Bytes.Weights
		switch {
		case m.Tied && !r.part:
			r.output, w0 = r.tokEmbd, 0 // the table uploaded first is also the head
		case m.Tied:
			r.tokEmbd, err = r.uploadMatrix(m.TokenEmbd)
			r.output = r.tokEmbd
		default:
			r.output, err = r.uploadMatrix(m.Output)
		}
		if err != nil {
			return nil, err
		}
		if r.outNorm, err = r.uploadVector(m.OutputNorm); err != nil {
			return nil, err
		}
		r.Bytes.Head = r.Bytes.Weights - w0
	}
	// rope_freqs factors stay on the host: the rope angles are computed there per pass
	// (setPositions), so nothing of them is uploaded and the plan's bytes equal the driver's.
	if f := h.Rope.Factors; f != nil && len(f) < h.Rope.Dims/2 {
		return nil, fmt.Errorf("resident driver: rope_freqs has %d factors, want %d", len(f), h.Rope.Dims/2)
	}
	for i := r.first; i < len(m.Layers); i++ {
		l := m.Layers[i]
		w0 := r.Bytes.Weights
		var lw layerWeights
		mats := []struct {
			dst *weight
			src model.Matrix
		}{{&lw.q, l.Q}, {&lw.k, l.K}, {&lw.v, l.V}, {&lw.o, l.O}}
		if l.DeltaNet != nil {
			mats = nil // the block's weights: uploadDeltaNet
			if lw.dn, err = r.uploadDeltaNet(i, l.DeltaNet); err != nil {
				return nil, err
			}
		}
		if l.MoE == nil {
			mats = append(mats, []struct {
				dst *weight
				src model.Matrix
			}{{&lw.gate, l.Gate}, {&lw.up, l.Up}, {&lw.down, l.Down}}...)
		}
		for _, p := range mats {
			if *p.dst, err = r.uploadMatrix(p.src); err != nil {
				return nil, err
			}
		}
		if l.MoE != nil {
			if lw.moe, err = r.uploadMoE(l.MoE); err != nil {
				return nil, err
			}
		}
		if lw.attnNorm, err = r.uploadVector(l.AttnNorm); err != nil {
			return nil, err
		}
		if lw.ffnNorm, err = r.uploadVector(l.FFNNorm); err != nil {
			return nil, err
		}
		var extra []layerVector
		if r.arch.vectors != nil {
			extra = r.arch.vectors(h, &l, &lw)
		}
		for _, v := range extra {
			if v.optional && v.src.Values == nil {
				continue // a vector the file may leave out
			}
			if *v.dst, err = r.uploadVector(v.src); err != nil {
				return nil, err
			}
		}
		r.Bytes.Layers += r.Bytes.Weights - w0
		r.layers = append(r.layers, lw) // appended before the caches, so that Close frees what failed
		if lw.dn != nil {
			continue // a recurrent layer keeps its state instead of a KV cache
		}
		lp := &r.layers[len(r.layers)-1]
		kvBytes := uint64(ctxLen) * kvRowBytes
		if lp.kCache, err = c.NewBuffer(kvBytes, false); err != nil {
			return nil, fmt.Errorf("layer %d K cache: %w", i, err)
		}
		if lp.vCache, err = c.NewBuffer(kvBytes, false); err != nil {
			return nil, fmt.Errorf("layer %d V cache: %w", i, err)
		}
		r.Bytes.KV += 2 * kvBytes
	}
	uploading = false
	written := time.Now()
	if err := c.EndUploads(); err != nil {
		return nil, fmt.Errorf("upload weights: %w", err)
	}
	uploaded := time.Now()
	slog.Debug("resident upload phases", "staging_ms", staged.Sub(started).Milliseconds(),
		"write_ms", written.Sub(staged).Milliseconds(), "drain_ms", uploaded.Sub(written).Milliseconds())
	if err := r.allocScratch(opts.Window); err != nil {
		return nil, err
	}
	if err := r.recordDecode(); err != nil {
		return nil, err
	}
	ok = true
	args := []any{"layers", len(r.layers), "first_layer", r.first, "head", r.hasHead, "dim", h.Dim, "ctx", ctxLen, "kv", "f16",
		"weights_mb", r.Bytes.Weights >> 20, "kv_mb", r.Bytes.KV >> 20, "scratch_mb", r.Bytes.Scratch >> 20,
		"upload_ms", uploaded.Sub(started).Milliseconds(), "record_ms", time.Since(uploaded).Milliseconds()}
	if p := h.MoE; p.Experts > 0 {
		args = append(args, "experts", p.Experts, "experts_used", p.Used)
	}
	if len(h.Recurrent) > 0 {
		args = append(args, "recurrent_kb", r.Bytes.Recurrent>>10)
	}
	slog.Info("vulkan resident driver ready", args...)
	r.precompileWindows()
	return r, nil
}

// uploadMatrix copies a matrix in its GGUF layout, split by rows so that every slice fits one
// binding (slices start on 64-row boundaries, keeping output offsets aligned).
func (r *Resident) uploadMatrix(m model.Matrix) (weight, error) {
	w := weight{name: m.Name, typ: m.Type, rows: m.Rows, cols: m.Cols}
	maxRows := int(r.c.Info.MaxStorageBufferRange / uint64(m.RowBytes))
	if maxRows < m.Rows {
		maxRows -= maxRows % 64
	}
	if maxRows <= 0 {
		return w, fmt.Errorf("tensor %q: one row of %d bytes exceeds the storage-buffer range: %w", m.Name, m.RowBytes, ErrTooLarge)
	}
	if len(m.Data) < m.Rows*m.RowBytes {
		return w, fmt.Errorf("tensor %q: %d bytes of data, want %d", m.Name, len(m.Data), m.Rows*m.RowBytes)
	}
	for r0 := 0; r0 < m.Rows; r0 += maxRows {
		n := min(maxRows, m.Rows-r0)
		buf, err := r.c.NewBuffer(alignUp(uint64(n*m.RowBytes), weightAlign), false)
		if err != nil {
			return w, fmt.Errorf("upload tensor %q: %w", m.Name, err)
		}
		w.slices = append(w.slices, weightSlice{buf: buf, row0: r0, rows: n})
		if err := buf.Write(0, m.Data[r0*m.RowBytes:(r0+n)*m.RowBytes]); err != nil {
			return w, fmt.Errorf("upload tensor %q: %w", m.Name, err)
		}
		r.Bytes.Weights += buf.Size
	}
	return w, nil
}

func (r *Resident) uploadVector(v model.Vector) (vector, error) {
	if v.Values == nil {
		return vector{}, fmt.Errorf("vector %q is missing", v.Name)
	}
	buf, err := r.c.NewBuffer(alignUp(uint64(4*len(v.Values)), weightAlign), false)
	if err != nil {
		return vector{}, fmt.Errorf("upload %q: %w", v.Name, err)
	}
	if err := buf.WriteF32(0, v.Values); err != nil {
		buf.Free()
		return vector{}, fmt.Errorf("upload %q: %w", v.Name, err)
	}
	r.Bytes.Weights += buf.Size
	return vector{buf: buf}, nil
}

func (r *Resident) allocScratch(window int) error {
	h := r.h
	if window <= 0 {
		window = Window
	}
	r.rows = min(window, r.ctxLen)
	rng := r.c.Info.MaxStorageBufferRange
	// The widest activation must fit one binding for a full window.
	ff := ffnWidth(h)
	widest := max(ff, h.QDim(), h.Dim, h.MoE.Used*h.Dim)
	if len(h.Recurrent) > 0 {
		widest = max(widest, 2*h.QDim(), h.SSM.ConvDim())
	}
	for r.rows > 1 && uint64(r.rows*widest*4) > rng {
		r.rows /= 2
	}
	r.logitRows = max(1, min(r.rows, int(rng/uint64(4*h.VocabSize))))
	type alloc struct {
		dst  **Buffer
		n    int
		host bool
	}
	allocs := []alloc{
		{&r.x, r.rows * h.Dim, false}, {&r.xn, r.rows * h.Dim, false},
		{&r.q, r.rows * h.QDim(), false}, {&r.k, r.rows * h.KDim(), false}, {&r.v, r.rows * h.VDim(), false},
		{&r.att, r.rows * h.QDim(), false}, {&r.gate, r.rows * ff, false}, {&r.up, r.rows * ff, false},
		{&r.xq, r.rows * max(ff, h.QDim(), h.Dim, h.SSM.ValueDim()), false},
		{&r.ids, r.rows, true}, {&r.pos, 1, true}, {&r.ropeCS, r.rows * r.ropeDims, true},
	}
	for _, a := range r.deltaScratchAllocs() {
		allocs = append(allocs, alloc{a.dst, a.n, false})
	}
	if r.c.cm2Able && r.c.cm2Stage {
		allocs = append(allocs, alloc{&r.stage, plan.WeightStagingBytes / 4, false})
	}
	if r.c.usesSplitAttention(h.HeadDim) {
		allocs = append(allocs, alloc{&r.attPart, r.c.attentionPartialFloats(r.rows, h.Heads, h.HeadsKV, h.HeadDim, r.ctxLen), false})
	}
	if r.hasHead {
		allocs = append(allocs, alloc{&r.logits, r.logitRows * h.VocabSize, true}, alloc{&r.best, 1, true}, alloc{&r.argParts, 2 * argmaxMaxParts, false},
			alloc{&r.argArrivals, 1, false})
		if r.c.deviceLogits {
			allocs = append(allocs, alloc{&r.logitsDev, h.VocabSize, false})
		}
	}
	if r.part {
		allocs = append(allocs, alloc{&r.hin, r.rows * h.Dim, true})
		if !r.hasHead {
			allocs = append(allocs, alloc{&r.hout, r.rows * h.Dim, true})
		}
	}
	for _, a := range allocs {
		b, err := r.c.NewBuffer(uint64(4*a.n), a.host)
		if err != nil {
			return fmt.Errorf("scratch: %w", err)
		}
		*a.dst = b
		r.Bytes.Scratch += b.Size
	}
	if r.argArrivals != nil {
		if err := r.argArrivals.WriteU32(0, []uint32{0}); err != nil {
			return fmt.Errorf("scratch: clear the argmax's arrival count: %w", err)
		}
	}
	return r.allocMoEScratch()
}

// matmul records Y = W·X over m tokens, one dispatch per row slice of W.
func (r *Resident) matmul(s *Seq, w weight, x Binding, y *Buffer, yOff uint64, m, xStride, yStride int, accumulate bool) {
	for _, sl := range w.slices {
		s.MatMul(w.typ, sl.buf.All(), x, sl.out(y, yOff, m, yStride), w.cols, sl.rows, m, xStride, yStride, accumulate)
	}
}

// out is the part of y (m rows yStride apart from byte yOff) that the slice's rows fill.
func (sl weightSlice) out(y *Buffer, yOff uint64, m, yStride int) Binding {
	return y.Range(yOff+uint64(4*sl.row0), uint64(4*((m-1)*yStride+sl.rows)))
}

// projection is one matrix product of a shared input: Y (+)= W·X.
type projection struct {
	w       weight
	y       *Buffer
	yStride int
	acc     bool
}

// project records the products of m rows of k-element input x (stride k) with each weight.
// Inputs are first rounded the way llama.cpp's CPU path rounds them for each weight type
// (f16, Q8_0/Q8_1 or Q8_K blocks) into xq; weights sharing a rounding share one pass.
func (r *Resident) project(s *Seq, x Binding, k, m int, ps ...projection) {
	done := r.projectX8(s, x, X8Input{}, k, m, ps)
	busy := false // an earlier group still reads xq
	for _, d := range done {
		busy = busy || d
	}
	busy = r.projectCM2(s, x, nil, k, m, ps, done, busy)
	xq := r.xq.Range(0, uint64(4*m*k))
	for i := range ps {
		if done[i] {
			continue
		}
		mode := r.c.actModeFor(ps[i].w.typ)
		src := x
		if mode != actNone && !r.c.roundsOwnActivations(ps[i].w.typ, k, m) {
			if busy {
				s.Barrier()
			}
			busy = true
			s.QuantizeActivations(ps[i].w.typ, x, xq, k, m, k)
			s.Barrier()
			src = xq
		}
		for j := i; j < len(ps); j++ {
			if !done[j] && r.c.actModeFor(ps[j].w.typ) == mode && r.c.roundsOwnActivations(ps[j].w.typ, k, m) == r.c.roundsOwnActivations(ps[i].w.typ, k, m) {
				r.matmul(s, ps[j].w, src, ps[j].y, 0, m, k, ps[j].yStride, ps[j].acc)
				done[j] = true
			}
		}
	}
}

// projectCM2 records the products of ps that take the cooperative matrix 2 kernels (takesCM2)
// and are not done yet, marking them done: they share one fp16 packing of x in r.xq (with up,
// of silu(x)·up, the SwiGLU folded into the packing); quantized weights reach them through an
// fp16 staging of their rows (stagedMatMul). busy says whether an earlier product may still
// read r.xq; it returns whether one may now.
func (r *Resident) projectCM2(s *Seq, x Binding, up *Binding, k, m int, ps []projection, done []bool, busy bool) bool {
	xq := r.xq.Range(0, uint64(4*m*k))
	packed, staged := false, false
	together, offs := r.stageTogether(k, m, ps, done)
	for i, p := range ps {
		if done[i] || !r.takesCM2(p.w, k, m) {
			continue
		}
		if !packed {
			if busy {
				s.Barrier()
			}
			if up != nil {
				s.PackF16SwiGLU(x, *up, xq, k, m)
			} else {
				s.PackF16(x, xq, k, m, k)
			}
			s.Barrier()
			packed, busy = true, true
		}
		if together != nil {
			continue // below, all at once
		}
		for _, sl := range p.w.slices {
			if r.c.usesCM2(p.w.typ, k, m) {
				s.MatMulF16X(p.w.typ, sl.buf.All(), xq, sl.out(p.y, 0, m, p.yStride), k, sl.rows, m, p.yStride, p.acc)
			} else {
				r.stagedMatMul(s, p.w.typ, sl, xq, p.y, k, m, p.yStride, p.acc, &staged)
			}
		}
		done[i] = true
	}
	if together != nil {
		// every staged weight's rows side by side in one staging, then every product at once
		jobs := make(stageStep, len(together))
		for j, i := range together {
			sl := ps[i].w.slices[0]
			jobs[j] = stageJob{t: ps[i].w.typ, w: sl.buf.All(), k: k, rows: sl.rows, off: offs[j]}
		}
		base := r.beginStaging(s, jobs, staged)
		for j, i := range together {
			p := ps[i]
			sl := p.w.slices[0]
			s.MatMulF16X(quant.F16, r.stage.Range(base+offs[j], uint64(2*sl.rows*k)), xq, sl.out(p.y, 0, m, p.yStride), k, sl.rows, m, p.yStride, p.acc)
			done[i] = true
		}
		r.stageAhead(s)
	}
	return busy
}

// stageTogether returns the indexes of ps whose products take the cm2 F16 kernel through
// the fp16 staging, and where each stages its rows in a staging half, when there are two or more and
// a half holds all their rows side by side (each weight one slice, 256-aligned): their
// stagings then run in one stage and their products in the next, instead of stage, product,
// stage, product. Else nil.
func (r *Resident) stageTogether(k, m int, ps []projection, done []bool) (idx []int, offs []uint64) {
	if r.stage == nil {
		return nil, nil
	}
	total := uint64(0)
	for i, p := range ps {
		if done[i] || !r.takesCM2(p.w, k, m) {
			continue
		}
		if r.c.usesCM2(p.w.typ, k, m) || len(p.w.slices) != 1 {
			return nil, nil
		}
		idx, offs = append(idx, i), append(offs, total)
		total += alignUp(uint64(2*p.w.slices[0].rows*k), 256)
	}
	if len(idx) < 2 || total > r.stageHalfBytes() {
		return nil, nil
	}
	return idx, offs
}

// takesCM2 reports whether a product of m rows with weight w over k-element inputs runs on
// the cooperative matrix 2 F16 kernel: directly, or through the fp16 staging of its rows.
func (r *Resident) takesCM2(w weight, k, m int) bool {
	return r.c.usesCM2(w.typ, k, m) || r.stage != nil && r.c.usesCM2Staging(w.typ, k, m)
}

// fuses reports whether one-token products with the weights ws over k-element inputs all take
// the fused decode product (matvec_dec): m = 1 on a context that has it, types it covers, and
// each weight in one buffer, and not a type matvec_x8 takes (x8.go: faster on the H200). Only
// the FFN's gate and up take it (normProject says why).
func (r *Resident) fuses(m, k int, ws ...weight) bool {
	if m != 1 {
		return false
	}
	for _, w := range ws {
		if len(w.slices) != 1 || !r.c.usesFusedDecode(w.typ, k) || r.c.usesX8(w.typ, k, m) {
			return false
		}
	}
	return true
}

// normProject records the products ps of RMSNorm(r.x)·g over m rows of k elements: a norm pass
// into r.xn, then project. (Only the FFN's gate and up take the fused decode product: with the
// norm and rounding in every workgroup's prologue, the 4096-row products — qkv, attn_out,
// ffn_down, 2048 workgroups of 2-4 rows — got slower on the H200, 8B Q4_K qkv 820 -> 1579 µs
// and ffn_down 1530 -> 2492 µs a token, while gate+up+SwiGLU went 2730 -> 2197.)
func (r *Resident) normProject(s *Seq, g vector, k, m int, stamp func(string), ps ...projection) {
	if r.takesX8(k, m, ps) { // the norm folded into the one rounding pass
		gb := g.buf.All()
		r.projectX8(s, r.x.All(), X8Input{Norm: &gb, Eps: r.h.NormEps}, k, m, ps)
		return
	}
	if x8, f32, ok := r.splitNormF32(k, m, ps); ok {
		// the f32 products normalize x themselves, beside the int8 products' rounding pass
		for _, p := range f32 {
			s.MatVecNormF32(p.w.slices[0].buf.All(), r.x.Range(0, uint64(4*k)), g.buf.All(), p.y.Range(0, uint64(4*p.w.slices[0].rows)), k, p.w.slices[0].rows, r.h.NormEps)
		}
		if len(x8) > 0 {
			gb := g.buf.All()
			r.projectX8(s, r.x.All(), X8Input{Norm: &gb, Eps: r.h.NormEps}, k, m, x8)
		}
		return
	}
	s.RMSNorm(r.x.All(), g.buf.All(), r.xn.All(), k, m, k, r.h.NormEps)
	s.Barrier()
	stamp("norm")
	r.project(s, r.xn.All(), k, m, ps...)
}

// foldsNorm reports whether normProject records the products ps of k-element rows over m
// rows without an RMSNorm stage before them (the norm in their rounding pass or f32 products).
func (r *Resident) foldsNorm(k, m int, ps []projection) bool {
	_, _, ok := r.splitNormF32(k, m, ps)
	return ok || r.takesX8(k, m, ps)
}

// splitNormF32 splits a decode step's normed products into those on the int8 products and
// f32 ones that matvec_norm_f32 serves (one slice, written not accumulated), so that no RMSNorm
// stage precedes them (the Gated DeltaNet's beta and alpha beside its qkv and z; every product
// of an f32 model such as stories260K; fast tier, VKLLM_GPU_NORM_F32); ok is false where any
// product is neither or none is f32.
func (r *Resident) splitNormF32(k, m int, ps []projection) (x8, f32 []projection, ok bool) {
	if m != 1 || !r.c.normF32 || r.c.exact || k%4 != 0 {
		return nil, nil, false
	}
	for _, p := range ps {
		if p.w.typ == quant.F32 && len(p.w.slices) == 1 && !p.acc {
			f32 = append(f32, p)
		} else {
			x8 = append(x8, p)
		}
	}
	if len(f32) == 0 || len(x8) > 0 && !r.takesX8(k, m, x8) {
		return nil, nil, false
	}
	return x8, f32, true
}

// record records the forward pass of m tokens (ids/pos buffers already hold them) up to the
// final norm: the embedding, each layer as its architecture composes it (arch_*.go), the norm;
// head adds the output projection of the rows from first, count rows.
func (r *Resident) record(s *Seq, m int) {
	h := r.h
	dim := h.Dim
	stamp := r.stamper(s)
	stamp("start")
	if r.part {
		s.Copy(r.hin, 0, r.x, 0, uint64(4*m*dim))
	} else {
		for _, sl := range r.tokEmbd.slices {
			s.Embed(r.tokEmbd.typ, sl.buf.All(), r.ids.All(), r.x.All(), dim, m, sl.row0, sl.rows, dim)
		}
	}
	s.Barrier()
	stamp("embed")
	r.routed = 0
	for i := range r.layers {
		r.arch.layer(r, s, &r.layers[i], m)
	}
	if !r.hasHead {
		s.Copy(r.x, 0, r.hout, 0, uint64(4*m*dim))
		return
	}
	r.headRoundsNorm = r.foldsNorm(dim, m, []projection{r.headProjection()})
	if r.headRoundsNorm { // the head's rounding pass (or f32 product) normalizes: one stage fewer a decode step
		return
	}
	s.RMSNorm(r.x.All(), r.outNorm.buf.All(), r.xn.All(), dim, m, dim, h.NormEps)
	s.Barrier()
	stamp("norm")
}

// head records the output projection of count rows starting at row first into logits.
func (r *Resident) head(s *Seq, first, count int) {
	dim := r.h.Dim
	if r.headRoundsNorm && first == 0 && count == 1 {
		r.headRoundsNorm = false
		r.normProject(s, r.outNorm, dim, 1, func(string) {}, r.headProjection())
		return
	}
	x := r.xn.Range(uint64(4*first*dim), uint64(4*count*dim))
	r.project(s, x, dim, count, r.headProjection())
}

// headProjection is the output projection into the logits.
func (r *Resident) headProjection() projection {
	if r.headOut != nil {
		return projection{r.output, r.headOut, r.h.VocabSize, false}
	}
	return projection{r.output, r.logits, r.h.VocabSize, false}
}

// recordDecode records the decode step's command, its kernels made first on several cores
// (precompile.go) where the context precompiles.
func (r *Resident) recordDecode() error {
	if r.c.precompileOn {
		t0 := time.Now()
		wants := r.wantsKernels(0, r.recordStep)
		n := r.c.precompile(wants, precompileWorkers(), nil)
		slog.Debug("precompile: decode step kernels made", "made", n, "wanted", len(wants), "ms", time.Since(t0).Milliseconds())
	}
	s, err := r.c.NewSeq()
	if err != nil {
		return err
	}
	if r.prof {
		if err := s.EnableTimestamps(16 + 16*len(r.layers)); err != nil {
			s.Free()
			return err
		}
	}
	r.recordStep(s)
	if err := s.End(); err != nil {
		s.Free()
		return fmt.Errorf("record the decode pass: %w", err)
	}
	r.decode = s
	return nil
}

// recordStep records one decode step into s: the forward of one row, and where the model has
// its head here, the head and the greedy argmax.
func (r *Resident) recordStep(s *Seq) {
	r.record(s, 1)
	if r.hasHead {
		// the head writes the logits into device memory, copied to the host's after the argmax
		// has read them there (VKLLM_GPU_DEVICE_LOGITS), or straight into host-visible memory
		logits := r.logits
		if r.c.deviceLogits && r.logitsDev != nil && r.drawing == nil {
			logits = r.logitsDev
		}
		r.headOut = logits
		r.head(s, 0, 1)
		r.headOut = nil
		s.Barrier()
		if r.prof {
			s.Stamp("head")
		}
		vocab := uint64(4 * r.h.VocabSize)
		if d := r.drawing; d != nil {
			s.SampleToken(logits.Range(0, vocab), d.cfg.All(), d.u.All(), r.best.Range(0, 8), r.h.VocabSize)
		} else if r.c.argmaxWide {
			s.ArgmaxWide(logits.Range(0, vocab), r.best.All(), r.argParts.All(), r.argArrivals.All(), r.h.VocabSize)
		} else {
			s.Argmax(logits.Range(0, vocab), r.best.All(), r.h.VocabSize)
		}
		if logits != r.logits {
			s.Copy(logits, 0, r.logits, 0, vocab)
		}
		if r.prof {
			s.Barrier()
			s.Stamp("argmax")
		}
	}
}

func (r *Resident) checkTokens(tokens []int, pos int) error {
	if len(tokens) == 0 {
		return errors.New("vulkan eval: no tokens")
	}
	if pos < 0 || pos+len(tokens) > r.ctxLen {
		return fmt.Errorf("vulkan eval: positions %d..%d outside the context of %d", pos, pos+len(tokens)-1, r.ctxLen)
	}
	for i, t := range tokens {
		if t < 0 || t >= r.h.VocabSize {
			return fmt.Errorf("vulkan eval: token %d at index %d outside the vocabulary of %d", t, i, r.h.VocabSize)
		}
	}
	return nil
}

func (r *Resident) setInputs(tokens []int, pos int) error {
	ids := make([]uint32, len(tokens))
	for i, t := range tokens {
		ids[i] = uint32(t)
	}
	if err := r.ids.WriteU32(0, ids); err != nil {
		return err
	}
	return r.setPositions(pos, len(tokens))
}

// setPositions writes the first position of the next pass and the rope angles of its n rows
// (computed here, on the host, with the CPU reference's arithmetic).
func (r *Resident) setPositions(pos, n int) error {
	r.windowEnd = pos + n
	return r.writePositions(r.pos, r.ropeCS, pos, n)
}

// writePositions writes the first position of a pass of n rows into posBuf and its rows' rope
// angles into csBuf.
func (r *Resident) writePositions(posBuf, csBuf *Buffer, pos, n int) error {
	if err := posBuf.WriteU32(0, []uint32{uint32(pos)}); err != nil {
		return err
	}
	if len(r.ropeTab) < n*r.ropeDims {
		r.ropeTab = make([]float32, r.rows*r.ropeDims)
	}
	tab := r.ropeTab[:n*r.ropeDims]
	RopeAngles(tab, pos, n, r.ropeDims, r.h.Rope.FreqBase, r.ropeScale, r.h.Rope.Factors)
	if r.ropeStill != nil {
		half := r.ropeDims / 2
		for t := 0; t < n; t++ {
			for i, still := range r.ropeStill {
				if still {
					tab[2*(t*half+i)], tab[2*(t*half+i)+1] = 1, 0
				}
			}
		}
	}
	return csBuf.WriteF32(0, tab)
}

// Eval runs tokens at positions pos.. and returns the last token's logits, or every token's
// when wantAllLogits.
func (r *Resident) Eval(tokens []int, pos int, wantAllLogits bool) ([]float32, error) {
	if r.closed {
		return nil, errors.New("vulkan eval: runner is closed")
	}
	if r.part {
		return nil, errors.New("vulkan eval: this runner holds part of the model and takes hidden states (EvalHidden)")
	}
	if err := r.checkTokens(tokens, pos); err != nil {
		return nil, err
	}
	if err := r.settle(); err != nil {
		return nil, err
	}
	if err := r.rewindTo(pos); err != nil {
		return nil, err
	}
	var out []float32
	var err error
	if len(r.h.Recurrent) > 0 && len(tokens) > 1 {
		out, err = r.evalPrompt(tokens, pos, wantAllLogits)
	} else {
		out, err = r.evalWindows(tokens, pos, wantAllLogits)
	}
	r.foldIn(tokens, pos, err != nil)
	return out, err
}

// evalWindows runs tokens at positions pos.. in windows of at most r.rows rows.
func (r *Resident) evalWindows(tokens []int, pos int, wantAllLogits bool) ([]float32, error) {
	vocab := r.h.VocabSize
	var all []float32
	if wantAllLogits {
		all = make([]float32, 0, len(tokens)*vocab)
	}
	for start := 0; start < len(tokens); {
		n := min(r.rows, len(tokens)-start)
		win := tokens[start : start+n]
		if err := r.setInputs(win, pos+start); err != nil {
			return nil, err
		}
		if n == 1 {
			if err := r.runDecode(); err != nil {
				return nil, err
			}
			lg, err := r.logits.ReadF32(0, vocab)
			if err != nil {
				return nil, err
			}
			if wantAllLogits {
				all = append(all, lg...)
			} else if start+n == len(tokens) {
				return lg, nil
			}
			start += n
			continue
		}
		last := start+n == len(tokens)
		lg, err := r.prefill(n, wantAllLogits, last)
		if err != nil {
			return nil, err
		}
		if wantAllLogits {
			all = append(all, lg...)
		} else if last {
			return lg, nil
		}
		start += n
	}
	return all, nil
}

func (r *Resident) runDecode() error {
	t0 := time.Now()
	if err := r.decode.Run(); err != nil {
		return fmt.Errorf("vulkan decode: %w", err)
	}
	r.lastRows = 1
	if r.prof {
		r.profile(time.Since(t0))
	}
	r.markWarm()
	return nil
}

// markWarm reports the first decode step run (ResidentOptions.AfterWarmup).
func (r *Resident) markWarm() {
	if !r.warmed {
		r.warmed = true
		if !r.part {
			warmedUp(r.c, r.onWarmup)
		}
	}
}

// profile accumulates decode timings and logs a per-token average every 32 tokens.
func (r *Resident) profile(wall time.Duration) {
	tm, err := r.decode.Timings()
	if err != nil || tm == nil {
		return
	}
	if r.profSum == nil {
		r.profSum = map[string]float64{}
	}
	for k, v := range tm {
		r.profSum[k] += v
	}
	r.profSum["wall"] += float64(wall.Nanoseconds())
	r.profTok++
	if r.profTok%32 == 0 {
		args := []any{"tokens", r.profTok}
		for _, k := range profileStages(r.profSum) {
			args = append(args, k+"_us", math.Round(r.profSum[k]/float64(r.profTok)/1e3))
		}
		slog.Info("vulkan decode profile (per token)", args...)
	}
}

// profileOrder is the order the profiles print their usual stages in, one layer's stages top to
// bottom; profileStages puts any other stage a forward stamps (the DeltaNet layers' ssm_conv and
// delta_rule, ...) after them, sorted, so that every stamped stage is printed.
var profileOrder = []string{"start", "embed", "norm", "qkv", "ssm_conv", "delta_rule", "rope_kv", "attention", "attn_out",
	"router", "route", "group", "ffn_up", "swiglu", "ffn_down", "head", "argmax", "wall"}

func profileStages(tm map[string]float64) []string {
	var keys []string
	for _, k := range profileOrder {
		if _, ok := tm[k]; ok {
			keys = append(keys, k)
		}
	}
	var rest []string
	for k := range tm {
		if !slices.Contains(profileOrder, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(keys, rest...)
}

// prefill runs a window of n > 1 rows already in ids/pos; it returns the last row's logits,
// or all rows' when all.
func (r *Resident) prefill(n int, all, last bool) ([]float32, error) {
	t0 := time.Now()
	s, err := r.c.NewSeq()
	if err != nil {
		return nil, err
	}
	defer s.Free()
	if r.prof {
		if err := s.EnableTimestamps(16 + 16*len(r.layers)); err != nil {
			return nil, err
		}
	}
	s.span = r.windowEnd
	r.beginStagingPass(r.plannedStagings(n))
	r.lastRows = n
	r.record(s, n)
	r.beginStagingPass(nil)
	if !r.hasHead {
		if err := s.Run(); err != nil {
			return nil, fmt.Errorf("vulkan prefill: %w", err)
		}
		r.logPrefill(s, n, time.Since(t0))
		return r.hout.ReadF32(0, n*r.h.Dim)
	}
	vocab := r.h.VocabSize
	if !all {
		if last {
			r.head(s, n-1, 1)
		}
		if err := s.Run(); err != nil {
			return nil, fmt.Errorf("vulkan prefill: %w", err)
		}
		r.logPrefill(s, n, time.Since(t0))
		if !last {
			return nil, nil
		}
		return r.logits.ReadF32(0, vocab)
	}
	if err := s.Run(); err != nil {
		return nil, fmt.Errorf("vulkan prefill: %w", err)
	}
	r.logPrefill(s, n, time.Since(t0))
	out := make([]float32, 0, n*vocab)
	for first := 0; first < n; first += r.logitRows {
		cnt := min(r.logitRows, n-first)
		hs, err := r.c.NewSeq()
		if err != nil {
			return nil, err
		}
		r.head(hs, first, cnt)
		err = hs.Run()
		hs.Free()
		if err != nil {
			return nil, fmt.Errorf("vulkan output head: %w", err)
		}
		lg, err := r.logits.ReadF32(0, cnt*vocab)
		if err != nil {
			return nil, err
		}
		out = append(out, lg...)
	}
	return out, nil
}

func (r *Resident) logPrefill(s *Seq, n int, wall time.Duration) {
	if !r.prof {
		return
	}
	tm, err := s.Timings()
	if err != nil || tm == nil {
		return
	}
	args := []any{"rows", n, "wall_ms", wall.Milliseconds()}
	for _, k := range profileStages(tm) {
		args = append(args, k+"_us", math.Round(tm[k]/1e3))
	}
	slog.Info("vulkan prefill window profile", args...)
}

// EvalHidden runs n rows of hidden states x (n × dim, token-major: the residual stream entering
// layer Part.FirstLayer) at positions pos.. through the resident layers. With the head on the
// device it returns the last row's logits, or every row's when wantAllLogits; without it, every
// row's hidden states after the last layer (n × dim), for the caller's final norm and head.
func (r *Resident) EvalHidden(x []float32, n, pos int, wantAllLogits bool) ([]float32, error) {
	if r.closed {
		return nil, errors.New("vulkan eval: runner is closed")
	}
	if !r.part {
		return nil, errors.New("vulkan eval: this runner holds the whole model and takes tokens (Eval)")
	}
	dim := r.h.Dim
	if n <= 0 || len(x) != n*dim {
		return nil, fmt.Errorf("vulkan eval: %d hidden values for %d rows of %d", len(x), n, dim)
	}
	if pos < 0 || pos+n > r.ctxLen {
		return nil, fmt.Errorf("vulkan eval: positions %d..%d outside the context of %d", pos, pos+n-1, r.ctxLen)
	}
	if err := r.settle(); err != nil {
		return nil, err
	}
	var out []float32
	for start := 0; start < n; {
		cnt := min(r.rows, n-start)
		if err := r.hin.WriteF32(0, x[start*dim:(start+cnt)*dim]); err != nil {
			return nil, err
		}
		if err := r.setPositions(pos+start, cnt); err != nil {
			return nil, err
		}
		last := start+cnt == n
		var got []float32
		var err error
		switch {
		case cnt == 1:
			if err = r.runDecode(); err != nil {
				return nil, err
			}
			if r.hasHead {
				got, err = r.logits.ReadF32(0, r.h.VocabSize)
			} else {
				got, err = r.hout.ReadF32(0, dim)
			}
		default:
			got, err = r.prefill(cnt, wantAllLogits, last)
		}
		if err != nil {
			return nil, err
		}
		if !r.hasHead || wantAllLogits {
			out = append(out, got...)
		} else if last {
			out = got
		}
		start += cnt
	}
	return out, nil
}

// Greedy runs one token at pos through the pre-recorded decode pass and returns the
// device-side argmax of its logits (a 4-byte read). Where the runner chains (chain.go), the
// step at pos+1 with that argmax is queued behind it before it returns, so the next call of a
// greedy generation finds its step already running.
func (r *Resident) Greedy(token, pos int) (int, error) {
	if r.closed {
		return 0, errors.New("vulkan greedy: runner is closed")
	}
	if r.part {
		return 0, errors.New("vulkan greedy: this runner holds part of the model and takes hidden states (EvalHidden)")
	}
	if err := r.checkTokens([]int{token}, pos); err != nil {
		return 0, err
	}
	if r.chains() {
		next, err := r.greedyChained(token, pos)
		if err != nil {
			return 0, err
		}
		r.lastRows = 1
		r.markWarm()
		return next, nil
	}
	if err := r.settle(); err != nil {
		return 0, err
	}
	if err := r.rewindTo(pos); err != nil {
		return 0, err
	}
	if err := r.setInputs([]int{token}, pos); err != nil {
		return 0, err
	}
	err := r.runDecode()
	r.foldIn([]int{token}, pos, err != nil)
	if err != nil {
		return 0, err
	}
	b, err := r.best.ReadU32(0, 1)
	if err != nil {
		return 0, err
	}
	return int(b[0]), nil
}

// Reset forgets the cached positions. Attention reads only positions before the current
// one, so no KV cache needs clearing; a recurrent state is cleared by the next evaluation.
func (r *Resident) Reset() {
	if len(r.h.Recurrent) > 0 {
		r.stale, r.history = true, r.history[:0]
	}
}

// Name identifies the runner.
func (r *Resident) Name() string { return "vulkan:" + r.c.Info.Name }

// PrefillWindow is the most rows a prefill window takes (ResidentOptions.Window, or fewer for
// a short context).
func (r *Resident) PrefillWindow() int { return r.rows }

// Context returns the positions the KV cache holds.
func (r *Resident) Context() int { return r.ctxLen }

// Close frees every device buffer of the model (not the Context).
func (r *Resident) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.stopPrecompile()
	settled := r.settle()
	for _, ch := range []**decodeChain{&r.chain, &r.sampled} {
		if *ch != nil {
			(*ch).free(r.c)
			*ch = nil
		}
	}
	if r.decode != nil {
		r.decode.Free()
	}
	freeW := func(w weight) {
		for _, s := range w.slices {
			s.buf.Free()
		}
	}
	freeW(r.tokEmbd)
	if r.output.slices != nil && (len(r.tokEmbd.slices) == 0 || r.output.slices[0].buf != r.tokEmbd.slices[0].buf) {
		freeW(r.output)
	}
	r.outNorm.buf.Free()
	for _, l := range r.layers {
		for _, w := range []weight{l.q, l.k, l.v, l.o, l.gate, l.up, l.down} {
			freeW(w)
		}
		l.moe.free()
		l.dn.free()
		for _, v := range []vector{l.attnNorm, l.ffnNorm, l.qBias, l.kBias, l.vBias, l.qNorm, l.kNorm} {
			v.buf.Free()
		}
		l.kCache.Free()
		l.vCache.Free()
	}
	r.moe.free()
	r.dn.free()
	for _, b := range []*Buffer{r.attPart, r.x, r.xn, r.q, r.k, r.v, r.att, r.gate, r.up, r.xq, r.logits, r.ids, r.pos, r.ropeCS, r.best, r.hin, r.hout, r.routing, r.argArrivals, r.argParts, r.logitsDev} {
		b.Free()
	}
	if r.ownCtx {
		return errors.Join(settled, r.c.Close())
	}
	return settled
}

var _ model.Runner = (*Resident)(nil)
