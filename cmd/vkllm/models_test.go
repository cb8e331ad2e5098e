package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/library"
	"github.com/vkllm/vkllm/store"
)

// TestModelsListsTheLibraryWithPlacements: `vkllm models` over an LM Studio folder and a --dir
// lists each model with where the plan puts it (or why it cannot run), and leaves them in the
// store's library, which the app shows.
func TestModelsListsTheLibraryWithPlacements(t *testing.T) {
	data := t.TempDir()
	t.Setenv("VKLLM_DATA_DIR", data)
	lms := filepath.Join(t.TempDir(), "models")
	if err := os.MkdirAll(filepath.Join(lms, "acme", "Tiny"), 0o755); err != nil {
		t.Fatal(err)
	}
	modeltest.TinySynth(t, filepath.Join(lms, "acme", "Tiny"), "llama", quant.Q8_0, 1)
	mine := t.TempDir()
	if err := os.WriteFile(filepath.Join(mine, "cut.gguf"), []byte("GGUF\x03\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := scanModels(context.Background(), []library.Root{{Path: lms, Source: library.SourceLMStudio}}, []string{mine}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("rows %+v, want the LM Studio model and the cut file", rows)
	}
	var out bytes.Buffer
	if err := printModels(&out, false, rows); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !regexp.MustCompile(`llama-Q8_0-1 +lmstudio +llama +.*(resident at ctx \d+|split \d+ of \d+|cpu)\n`).MatchString(text) ||
		!strings.Contains(text, "cannot run: the file ends inside its header") {
		t.Fatalf("vkllm models printed:\n%s", text)
	}
	st, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if lib, err := st.LibraryModels(context.Background()); err != nil || len(lib) != 2 {
		t.Fatalf("the store's library after vkllm models: %+v, %v", lib, err)
	}
}
