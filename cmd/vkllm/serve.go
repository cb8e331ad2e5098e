package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sidecar"
)

func init() {
	register("serve", "run the engine as an OpenAI-compatible HTTP server (the app's sidecar)", runServe)
}

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	model := fs.String("m", "", "GGUF model file to load at start (default: the embedded model)")
	listen := fs.String("listen", sidecar.DefaultListen, "address to listen on; port 0 picks a free one")
	tokenFile := fs.String("token-file", "", "file holding the bearer token; created with a random token (mode 0600) if missing (default: sidecar.token in the data dir)")
	allowRemote := fs.Bool("allow-remote", false, "allow a listen address other than loopback")
	cpu := fs.Bool("cpu", false, "run on the CPU")
	gpu := fs.Bool("gpu", false, "run on the GPU (fail instead of falling back)")
	ctxLen := fs.Int("c", 0, "context length (default: the model's own, capped by the plan)")
	kv := fs.String("kv", "", "KV cache type: f16 (default) or f32 (with --cpu only)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *cpu && *gpu {
		return fmt.Errorf("%w: --cpu and --gpu exclude each other", errUsage)
	}
	backend := engine.BackendAuto
	if *cpu {
		backend = engine.BackendCPU
	} else if *gpu {
		backend = engine.BackendGPU
	}
	return sidecar.Serve(ctx, sidecar.ServeOptions{
		ModelPath: *model, Listen: *listen, TokenFile: *tokenFile, AllowNonLoopback: *allowRemote,
		Backend: backend, Context: *ctxLen, KV: *kv,
	})
}
