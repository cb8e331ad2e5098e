package sidecar

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vkllm/vkllm/engine"
)

// fakeModel generates a fixed story word by word with a delay per word, honours MaxTokens, stop
// strings and cancellation, and records how it was used.
type fakeModel struct {
	name  string
	delay time.Duration
	ctx   int // the context it was loaded with; 0 = 256

	mu        sync.Mutex
	active    int
	maxActive int
	cancelled int
	calls     int
	closed    bool
}

var fakeWords = strings.Fields("Once upon a time there was a little fox named Tim who loved to run in the green park with his friends every day")

func newFakeLoader(delay time.Duration) (LoadFunc, func() *fakeModel) {
	var mu sync.Mutex
	var last *fakeModel
	load := func(ctx context.Context, opts engine.LoadOptions) (Model, error) {
		if strings.HasSuffix(opts.Path, ".broken") {
			return nil, fmt.Errorf("open %s: not a GGUF file", opts.Path)
		}
		name := "fake.gguf"
		if opts.Path != "" {
			name = opts.Path
		}
		m := &fakeModel{name: name, delay: delay, ctx: opts.Context}
		mu.Lock()
		last = m
		mu.Unlock()
		return m, nil
	}
	return load, func() *fakeModel { mu.Lock(); defer mu.Unlock(); return last }
}

func (m *fakeModel) Info() engine.ModelInfo {
	ctx := m.ctx
	if ctx == 0 {
		ctx = 256
	}
	return engine.ModelInfo{Name: m.name, Arch: "llama", Backend: "cpu", Placement: "cpu", Context: ctx}
}

func (m *fakeModel) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func (m *fakeModel) stats() (maxActive, cancelled, calls int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxActive, m.cancelled, m.calls
}

func (m *fakeModel) Generate(ctx context.Context, req engine.GenerateRequest, onPiece func(engine.Piece) error) (engine.Result, error) {
	m.mu.Lock()
	m.active++
	m.calls++
	m.maxActive = max(m.maxActive, m.active)
	m.mu.Unlock()
	defer func() { m.mu.Lock(); m.active--; m.mu.Unlock() }()

	prompt := req.Prompt
	for _, msg := range req.Messages {
		prompt += msg.Content + " "
	}
	res := engine.Result{PromptTokens: make([]int, len(strings.Fields(prompt)))}
	start := time.Now()
	n := req.MaxTokens
	if n <= 0 {
		n = len(fakeWords)
	}
	var text strings.Builder
	for i := 0; i < n; i++ {
		select {
		case <-ctx.Done():
			m.mu.Lock()
			m.cancelled++
			m.mu.Unlock()
			res.Stop, res.Text = engine.StopCancelled, text.String()
			return res, ctx.Err()
		case <-time.After(m.delay):
		}
		if i == 2 && strings.HasSuffix(m.name, ".failing") {
			return res, errors.New("decode step 2: device lost")
		}
		piece := fakeWords[i%len(fakeWords)]
		if i > 0 {
			piece = " " + piece
		}
		candidate := text.String() + piece
		for _, stop := range req.Stop {
			if j := strings.Index(candidate, stop); j >= 0 {
				rest := candidate[text.Len():j]
				text.WriteString(rest)
				if rest != "" {
					if err := onPiece(engine.Piece{ID: i, Text: rest}); err != nil {
						return res, err
					}
				}
				res.Text, res.Stop = text.String(), engine.StopString
				return res, nil
			}
		}
		text.WriteString(piece)
		res.Generated = append(res.Generated, i)
		if i == 0 {
			res.Timings.TimeToFirst = time.Since(start)
		}
		if err := onPiece(engine.Piece{ID: i, Text: piece}); err != nil {
			return res, err
		}
	}
	res.Text, res.Stop = text.String(), engine.StopLength
	if req.MaxTokens <= 0 {
		res.Stop = engine.StopEOS
	}
	res.Timings.PromptTokens = len(res.PromptTokens)
	res.Timings.GeneratedTokens = len(res.Generated)
	res.Timings.Generation = time.Since(start)
	res.Timings.GenPerSec = float64(len(res.Generated)) / max(res.Timings.Generation.Seconds(), 1e-9)
	return res, nil
}

// fakeText is what the fake generates for n tokens.
func fakeText(n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = fakeWords[i%len(fakeWords)]
	}
	return strings.Join(words, " ")
}
