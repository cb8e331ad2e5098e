package main

import (
	"context"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/sample"
)

func TestChatLoopKeepsHistoryAndResets(t *testing.T) {
	eng, err := engine.Load(context.Background(), engine.LoadOptions{Backend: engine.BackendCPU, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	in := strings.NewReader("Tell me a story\nAnd then?\n/reset\n\nHi\n")
	var out strings.Builder
	if err := chatLoop(context.Background(), eng, in, &out, "", 6, sample.Params{}, false); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if got := strings.Count(text, "> "); got != 6 { // five lines plus the prompt at EOF
		t.Fatalf("%d prompts in %q", got, text)
	}
	if !strings.Contains(text, "(new conversation)") || !strings.HasPrefix(text, "stories260K.gguf (llama") {
		t.Fatalf("output %q", text)
	}
}

func TestChatLoopExitCommandStops(t *testing.T) {
	eng, err := engine.Load(context.Background(), engine.LoadOptions{Backend: engine.BackendCPU, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var out strings.Builder
	if err := chatLoop(context.Background(), eng, strings.NewReader("/exit\nnever read\n"), &out, "Be brief.", 4, sample.Params{}, false); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "> ") != 1 {
		t.Fatalf("output %q", out.String())
	}
}
