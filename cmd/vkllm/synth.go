package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model/synth"
)

func init() {
	register("synth", "write a random-weight GGUF model of a given shape and type (for benchmarks and tests)", runSynth)
}

func runSynth(ctx context.Context, args []string) error {
	var typeNames []string
	for _, t := range synth.Types {
		typeNames = append(typeNames, strings.ToLower(t.String()))
	}
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	out := fs.String("o", "", "output GGUF file (required)")
	preset := fs.String("preset", "tiny", "shape: tiny, 100m, 1b, 8b (llama, qwen2, qwen3); tiny, 30b-a3b (qwen3moe); tiny (qwen2moe, qwen35, qwen35moe)")
	arch := fs.String("arch", "llama", "architecture: "+strings.Join(synth.Architectures, ", "))
	typeName := fs.String("type", "q8_0", "type of the matrices (norms and the router stay f32; rows that do not hold whole blocks fall back as llama-quantize does): "+strings.Join(typeNames, ", "))
	vocabFrom := fs.String("vocab-from", "", "copy the tokenizer from this GGUF (default: the embedded model's 512-token vocabulary)")
	seed := fs.Uint64("seed", 11, "seed of the random weights")
	tile := fs.Bool("tile", false, fmt.Sprintf("quantize only the first %d values of each tensor (or expert) and repeat them: a full-size i-quant model in seconds, for timing only", synth.TileValues))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("synth needs -o FILE: %w", errUsage)
	}
	known := false
	for _, a := range synth.Architectures {
		known = known || a == *arch
	}
	if !known {
		return fmt.Errorf("unknown -arch %q (want %s): %w", *arch, strings.Join(synth.Architectures, ", "), errUsage)
	}
	shape, err := synth.Preset(*arch, *preset)
	if err != nil {
		return fmt.Errorf("-preset: %v: %w", err, errUsage)
	}
	typ, err := synth.ParseType(*typeName)
	if err != nil {
		return fmt.Errorf("-type: %v: %w", err, errUsage)
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
	res, err := synth.Write(ctx, *out, synth.Options{Arch: *arch, Shape: shape, Type: typ, Vocab: vocab, Seed: *seed, Tile: *tile})
	if err != nil {
		return err
	}
	for _, f := range res.Fallbacks {
		fmt.Fprintf(os.Stderr, "fallback %s\n", f)
	}
	fi, _ := os.Stat(*out)
	fmt.Printf("wrote %s: %s %s %s, %.1fM parameters, %.1f MiB, in %s", *out, *arch, *preset, typ, float64(res.Params)/1e6,
		float64(fi.Size())/(1<<20), time.Since(start).Round(time.Millisecond))
	if n := len(res.Fallbacks); n > 0 {
		fmt.Printf(" (%d tensors in a fallback type, listed on stderr)", n)
	}
	fmt.Println()
	return nil
}
