package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/quant"
)

func init() {
	register("synth", "write a random-weight GGUF model of a given shape and type (for benchmarks and tests)", runSynth)
}

// synthShape is the architecture of a synthetic model.
type synthShape struct {
	dim, layers, heads, headsKV, ffn, ctx int
}

// synthPresets are well-known shapes: the parameter counts land near the names.
var synthPresets = map[string]synthShape{
	"tiny": {dim: 256, layers: 2, heads: 4, headsKV: 2, ffn: 512, ctx: 2048},
	"100m": {dim: 768, layers: 12, heads: 12, headsKV: 12, ffn: 2048, ctx: 4096},  // ~110M with a 32000 vocab
	"1b":   {dim: 2048, layers: 16, heads: 32, headsKV: 8, ffn: 8192, ctx: 8192},  // llama-3.2-1B shape
	"8b":   {dim: 4096, layers: 32, heads: 32, headsKV: 8, ffn: 14336, ctx: 8192}, // llama-3-8B shape
}

func runSynth(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	out := fs.String("o", "", "output GGUF file (required)")
	preset := fs.String("preset", "tiny", "shape: tiny, 100m, 1b, 8b")
	arch := fs.String("arch", "llama", "architecture: llama, qwen2, qwen3")
	typeName := fs.String("type", "q8_0", "type of the matrices: f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q2_k, q3_k")
	vocabFrom := fs.String("vocab-from", "", "copy the tokenizer from this GGUF (default: the embedded model's 512-token vocabulary)")
	seed := fs.Uint64("seed", 11, "seed of the random weights")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("synth needs -o FILE: %w", errUsage)
	}
	shape, ok := synthPresets[strings.ToLower(*preset)]
	if !ok {
		return fmt.Errorf("unknown -preset %q (want tiny, 100m, 1b or 8b): %w", *preset, errUsage)
	}
	typ, err := parseQuantType(*typeName)
	if err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	switch *arch {
	case "llama", "qwen2", "qwen3":
	default:
		return fmt.Errorf("unknown -arch %q (want llama, qwen2 or qwen3): %w", *arch, errUsage)
	}
	var vocab *gguf.File
	if *vocabFrom != "" {
		vocab, err = gguf.Open(*vocabFrom)
	} else {
		vocab, err = gguf.OpenBytes(embedded.Name, embedded.ModelGGUF)
	}
	if err != nil {
		return fmt.Errorf("open vocabulary source: %w", err)
	}
	defer vocab.Close()
	start := time.Now()
	params, err := writeSynth(ctx, *out, *arch, shape, typ, vocab, *seed)
	if err != nil {
		return err
	}
	fi, _ := os.Stat(*out)
	fmt.Printf("wrote %s: %s %s %s, %.1fM parameters, %.1f MiB, in %s\n", *out, *arch, *preset, typ, float64(params)/1e6,
		float64(fi.Size())/(1<<20), time.Since(start).Round(time.Millisecond))
	return nil
}

func parseQuantType(name string) (quant.Type, error) {
	for _, t := range []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1,
		quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		if strings.EqualFold(t.String(), name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown tensor type %q", name)
}

type synthTensor struct {
	name  string
	typ   quant.Type
	dims  []uint64
	scale float32
	bias  float32
	data  []byte
}

func writeSynth(ctx context.Context, path, arch string, s synthShape, typ quant.Type, vocab *gguf.File, seed uint64) (int64, error) {
	tokens, ok := vocab.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) == 0 {
		return 0, fmt.Errorf("vocabulary source has no tokenizer.ggml.tokens")
	}
	nVocab := len(tokens)
	hd := s.dim / s.heads
	w := gguf.NewWriter()
	w.SetString("general.architecture", arch)
	w.SetString("general.name", fmt.Sprintf("vkllm synthetic %s %s seed %d", arch, typ, seed))
	w.SetUint32(arch+".embedding_length", uint32(s.dim))
	w.SetUint32(arch+".block_count", uint32(s.layers))
	w.SetUint32(arch+".attention.head_count", uint32(s.heads))
	w.SetUint32(arch+".attention.head_count_kv", uint32(s.headsKV))
	w.SetUint32(arch+".feed_forward_length", uint32(s.ffn))
	w.SetUint32(arch+".context_length", uint32(s.ctx))
	w.SetUint32(arch+".rope.dimension_count", uint32(hd))
	w.SetFloat32(arch+".rope.freq_base", 10000)
	w.SetFloat32(arch+".attention.layer_norm_rms_epsilon", 1e-5)
	for _, kv := range vocab.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			w.SetValue(kv.Key, kv.Value)
		}
	}

	// The embedding and the head of K-quant models use Q6_K/Q4_K-style choices; rows must hold
	// whole blocks, which every preset's dim does.
	embdType, headType := typ, typ
	if typ == quant.Q2_K || typ == quant.Q3_K || typ == quant.Q4_K || typ == quant.Q5_K {
		headType = quant.Q6_K
	}
	inv := func(n int) float32 { return float32(1 / math.Sqrt(float64(n))) }
	var list []*synthTensor
	add := func(name string, t quant.Type, scale, bias float32, dims ...int) {
		ud := make([]uint64, len(dims))
		for i, d := range dims {
			ud[i] = uint64(d)
		}
		list = append(list, &synthTensor{name: name, typ: t, dims: ud, scale: scale, bias: bias})
	}
	add("token_embd.weight", embdType, 1, 0, s.dim, nVocab)
	for l := 0; l < s.layers; l++ {
		b := func(n string) string { return fmt.Sprintf("blk.%d.%s", l, n) }
		add(b("attn_norm.weight"), quant.F32, 0.1, 1, s.dim)
		add(b("attn_q.weight"), typ, inv(s.dim), 0, s.dim, s.heads*hd)
		add(b("attn_k.weight"), typ, inv(s.dim), 0, s.dim, s.headsKV*hd)
		add(b("attn_v.weight"), typ, inv(s.dim), 0, s.dim, s.headsKV*hd)
		add(b("attn_output.weight"), typ, inv(s.dim), 0, s.heads*hd, s.dim)
		add(b("ffn_norm.weight"), quant.F32, 0.1, 1, s.dim)
		add(b("ffn_gate.weight"), typ, inv(s.dim), 0, s.dim, s.ffn)
		add(b("ffn_up.weight"), typ, inv(s.dim), 0, s.dim, s.ffn)
		add(b("ffn_down.weight"), typ, inv(s.ffn), 0, s.ffn, s.dim)
		switch arch {
		case "qwen2":
			add(b("attn_q.bias"), quant.F32, 0.2, 0, s.heads*hd)
			add(b("attn_k.bias"), quant.F32, 0.2, 0, s.headsKV*hd)
			add(b("attn_v.bias"), quant.F32, 0.2, 0, s.headsKV*hd)
		case "qwen3":
			add(b("attn_q_norm.weight"), quant.F32, 0.1, 1, hd)
			add(b("attn_k_norm.weight"), quant.F32, 0.1, 1, hd)
		}
	}
	add("output_norm.weight", quant.F32, 0.1, 1, s.dim)
	add("output.weight", headType, 4*inv(s.dim), 0, s.dim, nVocab)

	// Quantize in parallel; each tensor's values depend only on the seed and its index.
	var (
		wg       sync.WaitGroup
		firstErr error
		errMu    sync.Mutex
		next     = make(chan int)
	)
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := list[i]
				n := 1
				for _, d := range t.dims {
					n *= int(d)
				}
				rng := rand.New(rand.NewPCG(seed, uint64(i)))
				vals := make([]float32, n)
				// uniform on [-sqrt(3), sqrt(3)] has unit variance
				for j := range vals {
					vals[j] = float32((rng.Float64()*2-1)*1.7320508)*t.scale + t.bias
				}
				data, err := quant.Quantize(t.typ, vals)
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("quantize %s to %s: %w", t.name, t.typ, err)
					}
					errMu.Unlock()
					continue
				}
				t.data = data
			}
		}()
	}
	for i := range list {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("synth cancelled: %w", err)
	}
	if firstErr != nil {
		return 0, firstErr
	}
	var params int64
	for _, t := range list {
		if err := w.AddTensor(t.name, t.typ, t.dims, t.data); err != nil {
			return 0, fmt.Errorf("add %s: %w", t.name, err)
		}
		n := int64(1)
		for _, d := range t.dims {
			n *= int64(d)
		}
		params += n
	}
	if err := w.WriteFile(path); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return params, nil
}
