package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/engine"
)

func TestSynthWritesLoadableModelsOfEachArchitecture(t *testing.T) {
	tests := []struct{ arch, typ string }{
		{"llama", "q8_0"}, {"qwen2", "q4_0"}, {"qwen3", "q4_k"}, {"qwen3moe", "q8_0"}, {"llama", "iq2_xxs"}, {"qwen3moe", "mxfp4"}, {"qwen2moe", "q4_k"},
	}
	for _, tc := range tests {
		t.Run(tc.arch+"-"+tc.typ, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if _, err := captureStdout(t, func() error {
				return runSynth(context.Background(), []string{"-o", path, "-arch", tc.arch, "-type", tc.typ})
			}); err != nil {
				t.Fatalf("synth: %v", err)
			}
			e, err := engine.Load(context.Background(), engine.LoadOptions{Path: path, Backend: engine.BackendCPU})
			if err != nil {
				t.Fatalf("load synthetic model: %v", err)
			}
			defer e.Close()
			info := e.Info()
			if info.Arch != tc.arch || info.Layers != 2 || info.Dim != 256 || info.VocabSize != 512 {
				t.Errorf("loaded %+v", info)
			}
			res, err := e.Generate(context.Background(), engine.GenerateRequest{Prompt: "Once upon a time", MaxTokens: 4}, nil)
			if err != nil || len(res.Generated) == 0 {
				t.Errorf("generate: %v (%d tokens)", err, len(res.Generated))
			}
		})
	}
}

func TestSynthRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"-o", "x", "-preset", "huge"}, {"-o", "x", "-type", "q9_9"}, {"-o", "x", "-arch", "gpt5"},
		{"-o", "x", "-arch", "qwen3moe", "-preset", "8b"}, {"-o", "x", "-arch", "llama", "-preset", "30b-a3b"}} {
		if err := runSynth(context.Background(), args); !errors.Is(err, errUsage) {
			t.Errorf("synth %v: err = %v, want a usage error", args, err)
		}
	}
}
