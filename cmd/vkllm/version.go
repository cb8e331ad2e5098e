package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/vkllm/vkllm/engine/bench"
)

// version is set at release build time with -ldflags "-X main.version=...".
var version = "dev"

// buildCommit is the VCS revision the binary was built from; engine/bench stamps it on every
// bench row too.
func buildCommit() string { return bench.BuildCommit() }

func init() {
	register("version", "print the vkllm version and build commit", func(context.Context, []string) error {
		fmt.Printf("vkllm %s (commit %s, %s, %s/%s)\n", version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	})
}
