package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
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
	var typeNames, mixNames []string
	for _, t := range synth.Types {
		typeNames = append(typeNames, strings.ToLower(t.String()))
	}
	for n := range synth.Mixes {
		mixNames = append(mixNames, n)
	}
	sort.Strings(mixNames)
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	out := fs.String("o", "", "output GGUF file (required)")
	preset := fs.String("preset", "tiny", "shape: tiny, 100m, 1b, 8b (llama, qwen2, qwen3); tiny, 30b-a3b (qwen3moe); tiny, qwen36-35b-a3b (qwen35moe, written tiled); tiny (qwen2moe, qwen35)")
	arch := fs.String("arch", "llama", "architecture: "+strings.Join(synth.Architectures, ", "))
	typeName := fs.String("type", "q8_0", "type of the matrices (norms and the router stay f32; rows that do not hold whole blocks fall back as llama-quantize does): "+strings.Join(typeNames, ", ")+"; or a mix of types by tensor role: "+strings.Join(mixNames, ", ")+" (unsloth's UD-IQ2_XXS: IQ2_XXS routed experts, Q8_0 attention, DeltaNet and shared expert, Q5_K embedding, Q6_K head)")
	vocabFrom := fs.String("vocab-from", "", "copy the tokenizer from this GGUF (default: the embedded model's 512-token vocabulary)")
	seed := fs.Uint64("seed", 11, "seed of the random weights")
	tile := fs.Bool("tile", false, fmt.Sprintf("quantize only the first %d values of each tensor (or expert) and repeat them: a full-size i-quant model in seconds, for timing only (on by default for the full-size qwen35moe preset; -tile=false quantizes it all, for hours)", synth.TileValues))
	headerOnly := fs.Bool("header-only", false, "write only the metadata and tensor infos (at the offsets the whole file would have), no tensor data: enough for vkllm plan")
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
	mix, err := synth.ParseMix(*typeName)
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
	tileSet := false
	fs.Visit(func(f *flag.Flag) { tileSet = tileSet || f.Name == "tile" })
	tiled := *tile
	if !tileSet && !*headerOnly && synth.TiledPresets[*arch+"/"+strings.ToLower(*preset)] {
		tiled = true
		fmt.Fprintf(os.Stderr, "note: %s %s is written tiled (each tensor's first %d values quantized and repeated; -tile=false quantizes it all, for hours)\n", *arch, *preset, synth.TileValues)
	}
	start := time.Now()
	res, err := synth.Write(ctx, *out, synth.Options{Arch: *arch, Shape: shape, Mix: &mix, Vocab: vocab, Seed: *seed, Tile: tiled, HeaderOnly: *headerOnly})
	if err != nil {
		return err
	}
	for _, f := range res.Fallbacks {
		fmt.Fprintf(os.Stderr, "fallback %s\n", f)
	}
	fi, err := os.Stat(*out)
	if err != nil {
		return fmt.Errorf("stat the written model: %w", err)
	}
	what := "wrote"
	if *headerOnly {
		what = "wrote the header of"
	}
	fmt.Printf("%s %s: %s %s %s, %.1fM parameters, %.1f MiB, in %s", what, *out, *arch, *preset, mix.Name, float64(res.Params)/1e6,
		float64(fi.Size())/(1<<20), time.Since(start).Round(time.Millisecond))
	if *headerOnly {
		fmt.Printf(" (the whole file: %.2f GB)", float64(res.Bytes)/1e9)
	}
	if n := len(res.Fallbacks); n > 0 {
		fmt.Printf(" (%d tensors in a fallback type, listed on stderr)", n)
	}
	fmt.Println()
	return nil
}
