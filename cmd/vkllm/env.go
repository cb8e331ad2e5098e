package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/vkllm/vkllm/engine/config"
)

func init() {
	register("env", "list the VKLLM_* environment variables and their current values", runEnv)
}

func runEnv(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("env", flag.ContinueOnError)
	markdown := fs.Bool("markdown", false, "print the docs/ENV.md table instead")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *markdown {
		fmt.Print(config.Markdown())
		return nil
	}
	for _, v := range config.All() {
		state := "(default)"
		if v.Set() {
			state = "(set)"
		}
		fmt.Printf("%-20s %-8s %-12s %s\n", v.Name, v.Raw(), state, v.Meaning)
	}
	return nil
}
