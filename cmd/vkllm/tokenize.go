package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/tokenizer"
)

func init() {
	register("tokenize", "print the token ids of a text (like llama-tokenize --ids)", runTokenize)
}

func runTokenize(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	path := fs.String("m", "", "GGUF model or vocab file (default: the embedded model)")
	noBOS := fs.Bool("no-bos", false, "do not add the BOS/EOS tokens the model's metadata asks for")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: give the text to tokenize: vkllm tokenize -m FILE TEXT", errUsage)
	}
	text := strings.Join(fs.Args(), " ")
	var (
		f   *gguf.File
		err error
	)
	if *path == "" {
		f, err = gguf.OpenBytes(embedded.Name, embedded.ModelGGUF)
	} else {
		f, err = gguf.Open(*path)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return fmt.Errorf("tokenizer of %s: %w", f.Path, err)
	}
	ids := tok.Encode(text, !*noBOS, true)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	fmt.Println(strings.Join(parts, " "))
	return nil
}
