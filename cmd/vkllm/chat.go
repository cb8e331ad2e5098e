package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/sample"
)

func init() {
	register("chat", "chat with a model in the terminal (multi-turn, the model's chat template)", runChat)
}

func runChat(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	mf := addModelFlags(fs)
	system := fs.String("system", "", "system prompt")
	n := fs.Int("n", 512, "most tokens per reply (0 = until end of turn or the context is full)")
	verbose := fs.Bool("v", false, "print speed after every reply")
	var sp sample.Params
	addSamplingFlags(fs, &sp, 0.7)
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts, err := mf.options()
	if err != nil {
		return err
	}
	eng, err := engine.Load(ctx, opts)
	if err != nil {
		return err
	}
	defer eng.Close()
	return chatLoop(ctx, eng, os.Stdin, os.Stdout, *system, *n, sp, *verbose)
}

// chatLoop reads one user turn per line from in until EOF or /exit and streams each reply to
// out. /reset starts a new conversation.
func chatLoop(ctx context.Context, eng *engine.Engine, in io.Reader, out io.Writer, system string, maxTokens int, sp sample.Params, verbose bool) error {
	info := eng.Info()
	fmt.Fprintf(out, "%s (%s, %s on %s). Type /exit to quit, /reset to start over.\n", info.Name, info.Arch, info.Quant, info.Backend)
	var history []engine.Message
	if system != "" {
		history = append(history, engine.Message{Role: "system", Content: system})
	}
	base := len(history)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for {
		fmt.Fprint(out, "> ")
		if !sc.Scan() {
			fmt.Fprintln(out)
			return sc.Err()
		}
		line := strings.TrimSpace(sc.Text())
		switch line {
		case "":
			continue
		case "/exit", "/quit":
			return nil
		case "/reset":
			history = history[:base]
			fmt.Fprintln(out, "(new conversation)")
			continue
		}
		history = append(history, engine.Message{Role: "user", Content: line})
		res, err := eng.Generate(ctx, engine.GenerateRequest{Messages: history, MaxTokens: maxTokens, Sampling: sp},
			func(p engine.Piece) error {
				_, err := io.WriteString(out, p.Text)
				return err
			})
		fmt.Fprintln(out)
		if err != nil {
			return err
		}
		if res.Stop == engine.StopCancelled || errors.Is(ctx.Err(), context.Canceled) {
			return nil
		}
		history = append(history, engine.Message{Role: "assistant", Content: res.Text})
		if verbose {
			printTimings(res.Timings, info)
		}
	}
}
