package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at release build time with -ldflags "-X main.version=...".
var version = "dev"

// buildCommit is the VCS revision the binary was built from (go build stamps it), shortened.
func buildCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 8 {
		rev = rev[:8]
	}
	if dirty && rev != "" {
		rev += "+dirty"
	}
	return rev
}

func init() {
	register("version", "print the vkllm version and build commit", func(context.Context, []string) error {
		fmt.Printf("vkllm %s (commit %s, %s, %s/%s)\n", version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	})
}
