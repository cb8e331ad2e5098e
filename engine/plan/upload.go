package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// UploadAlign is the byte alignment every tensor starts at in device memory. It is the largest
// minStorageBufferOffsetAlignment Vulkan allows (256), so one layout works on every device and
// the plan never has to ask the device for it.
const UploadAlign = 256

// Weight kinds, the groups the breakdown reports weights in.
const (
	KindEmbd   = "embd"   // token embedding table
	KindAttn   = "attn"   // attention projections (q, k, v, output, fused qkv) and their biases
	KindFFN    = "ffn"    // feed-forward projections (gate, up, down, experts) and their biases
	KindNorm   = "norm"   // every normalisation weight, per layer and final
	KindOutput = "output" // the output head (output.weight)
	KindOther  = "other"  // anything else the file carries; uploaded as is
)

// TensorSpec is one tensor as the GGUF file describes it: plain values, so this package needs no
// GGUF reader. Size is the tensor's byte size in its file (the quantized layout is uploaded
// unchanged, never expanded).
type TensorSpec struct {
	Name string
	Type string   // the tensor type's name, e.g. "Q4_K"; informational
	Dims []uint64 // ne0 first
	Size int64
}

// Upload is one tensor as the resident driver places it in device memory. The plan sums Bytes
// and the driver allocates exactly Offset+Bytes per tensor, so the two cannot drift.
type Upload struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Kind   string `json:"kind"`
	Layer  int    `json:"layer"`  // block index from "blk.N.", -1 for tensors outside the blocks
	Size   int64  `json:"size"`   // bytes of tensor data
	Offset int64  `json:"offset"` // start in the packed weight arena, a multiple of UploadAlign
	Bytes  int64  `json:"bytes"`  // device bytes: Size rounded up to UploadAlign
}

// UploadList turns the file's tensors into the device layout the resident driver uploads, in
// file order: each tensor packed at the next UploadAlign boundary of one weight arena. The driver
// calls this same function when it uploads (it may split the arena into allocations at tensor
// boundaries), so the plan's weight bytes are the driver's weight bytes. A negative size is an
// error naming the tensor.
func UploadList(tensors []TensorSpec) ([]Upload, error) {
	out := make([]Upload, 0, len(tensors))
	var off int64
	for _, t := range tensors {
		if t.Size < 0 {
			return nil, fmt.Errorf("tensor %q: size %d bytes, want at least 0", t.Name, t.Size)
		}
		if HostOnly(t.Name) {
			continue
		}
		bytes := alignUp(t.Size, UploadAlign)
		out = append(out, Upload{
			Name:   t.Name,
			Type:   t.Type,
			Kind:   KindOf(t.Name),
			Layer:  LayerOf(t.Name),
			Size:   t.Size,
			Offset: off,
			Bytes:  bytes,
		})
		off += bytes
	}
	return out, nil
}

// HostOnly reports whether the driver keeps tensor name on the host: the rope frequency
// factors (llama 3.1's rope_freqs.weight) only enter the rope angles, which the host computes
// per pass, so they take no device memory.
func HostOnly(name string) bool { return name == "rope_freqs.weight" }

// KindOf classifies a GGUF tensor name into a weight kind.
func KindOf(name string) string {
	base := name
	if LayerOf(name) >= 0 {
		base = name[strings.IndexByte(name[len("blk."):], '.')+len("blk.")+1:]
	}
	switch {
	case base == "token_embd.weight" || strings.HasPrefix(base, "token_embd"):
		return KindEmbd
	case strings.HasPrefix(base, "output_norm") || strings.Contains(base, "_norm") || strings.HasPrefix(base, "norm"):
		return KindNorm
	case strings.HasPrefix(base, "output"):
		return KindOutput
	case strings.HasPrefix(base, "attn_"):
		return KindAttn
	case strings.HasPrefix(base, "ffn_"):
		return KindFFN
	}
	return KindOther
}

// LayerOf returns N for a tensor named "blk.N.<...>", else -1.
func LayerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	num, _, ok := strings.Cut(rest, ".")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }
