package engine

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A prompt far larger than the context could ever hold is refused from its size, before it is
// rendered or tokenized: at once, allocating next to nothing, with the numbers.
func TestHugePromptIsRefusedBeforeItIsTokenized(t *testing.T) {
	e := loadEmbedded(t)
	huge := strings.Repeat("Once upon a time there was a fox. ", 50<<20/34) // 50 MB
	cases := []struct {
		name string
		req  GenerateRequest
	}{
		{"prompt", GenerateRequest{Prompt: huge}},
		{"chat", GenerateRequest{Messages: []Message{{Role: "user", Content: huge}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			start := time.Now()
			alloc := allocated(func() { _, err = e.PromptTokens(context.Background(), c.req) })
			took := time.Since(start)
			var tl *PromptTooLongError
			if !errors.As(err, &tl) || !errors.Is(err, ErrPromptTooLong) {
				t.Fatalf("PromptTokens: %v, want a *PromptTooLongError", err)
			}
			if !tl.AtLeast || tl.Bytes < len(huge) || tl.Tokens < e.Info().Context || tl.Context != e.Info().Context {
				t.Errorf("error %+v: want the bytes, a lower bound at or past the context, and the context", tl)
			}
			for _, want := range []string{"bytes", "at least", "the context holds"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if took > 200*time.Millisecond || alloc > 10<<20 {
				t.Errorf("refusing took %v and allocated %d MB: it tokenized", took, alloc>>20)
			}
		})
	}
}

// A prompt small in bytes but over the context in tokens stops tokenizing once it passes the
// context, and Generate says the same.
func TestPromptOverTheContextStopsTokenizingPastIt(t *testing.T) {
	e := loadEmbedded(t)
	long := strings.Repeat("a b ", e.Info().Context*2)
	_, err := e.PromptTokens(context.Background(), GenerateRequest{Prompt: long})
	var tl *PromptTooLongError
	if !errors.As(err, &tl) || tl.Tokens != e.Info().Context+1 {
		t.Fatalf("PromptTokens: %v, want a *PromptTooLongError at the context+1", err)
	}
	if _, err := e.Generate(context.Background(), GenerateRequest{Prompt: long}, nil); !errors.Is(err, ErrPromptTooLong) {
		t.Fatalf("Generate: %v, want ErrPromptTooLong", err)
	}
	if _, err := e.Generate(context.Background(), GenerateRequest{PromptTokens: make([]int, e.Info().Context)}, nil); !errors.Is(err, ErrPromptTooLong) {
		t.Fatalf("Generate with a context's worth of tokens: %v, want ErrPromptTooLong", err)
	}
}

// Tokens prepared before the turn are the tokens Generate would use itself.
func TestPreparedPromptTokensAreWhatGenerateUses(t *testing.T) {
	e := loadEmbedded(t)
	req := GenerateRequest{Messages: []Message{{Role: "user", Content: "Tell me a story"}}, MaxTokens: 3}
	ids, err := e.PromptTokens(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	own, err := e.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.PromptTokens = ids
	req.Messages = nil
	prepared, err := e.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, own.PromptTokens) || !slices.Equal(prepared.Generated, own.Generated) {
		t.Fatalf("prepared %v -> %v; Generate's own %v -> %v", ids, prepared.Generated, own.PromptTokens, own.Generated)
	}
	if _, err := e.Generate(context.Background(), GenerateRequest{PromptTokens: []int{1, 1 << 30}}, nil); err == nil {
		t.Error("Generate took a token outside the vocabulary")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.PromptTokens(ctx, GenerateRequest{Prompt: "Hello"}); !errors.Is(err, context.Canceled) {
		t.Errorf("PromptTokens on a cancelled context: %v", err)
	}
}

func TestLoadRefusesOutOfRangeOptionsNamingThem(t *testing.T) {
	cases := []struct {
		name string
		opts LoadOptions
		want string
	}{
		{"negative threads", LoadOptions{Backend: BackendCPU, Threads: -2}, "threads -2 is negative"},
		{"device below -1", LoadOptions{Backend: BackendCPU, DeviceIndex: -3}, "device -3 is out of range"},
		{"negative context", LoadOptions{Backend: BackendCPU, Context: -1}, "context -1 is negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := Load(context.Background(), c.opts)
			if err == nil {
				e.Close()
				t.Fatalf("Load(%+v) succeeded", c.opts)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v, want %q", err, c.want)
			}
		})
	}
}
