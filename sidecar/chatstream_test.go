package sidecar

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// stagedReader returns its parts one Read at a time; before the part at cancelAt it calls
// cancel, and after the last part it returns end.
type stagedReader struct {
	parts    []string
	cancelAt int
	cancel   func()
	end      error
	i        int
}

func (r *stagedReader) Read(p []byte) (int, error) {
	if r.i >= len(r.parts) {
		return 0, r.end
	}
	if r.i == r.cancelAt && r.cancel != nil {
		r.cancel()
	}
	n := copy(p, r.parts[r.i])
	r.i++
	return n, nil
}

func TestReadChatStreamTellsACleanCancelFromABadChunk(t *testing.T) {
	chunk := func(s string) string { return `data: {"choices":[{"delta":{"content":"` + s + `"}}]}` + "\n\n" }
	for _, tc := range []struct {
		name       string
		parts      []string
		cancelAt   int // -1: never
		end        error
		wantText   string
		wantBroken bool
		wantErr    string // "" for no error
		wantIs     error
	}{
		{"done", []string{chunk("ab"), chunk("cd"), "data: [DONE]\n\n"}, -1, io.EOF, "abcd", false, "", nil},
		{"stop cuts a chunk in half", []string{chunk("ab"), chunk("cd"), `data: {"choices":[{"del`}, 2, context.Canceled, "abcd", true, "context canceled", context.Canceled},
		{"a malformed chunk", []string{chunk("ab"), "data: {not json}\n\n"}, -1, io.EOF, "ab", false, "bad stream chunk", nil},
		{"the stream ends without [DONE]", []string{chunk("ab")}, -1, io.EOF, "ab", true, "unexpected EOF", io.ErrUnexpectedEOF},
		{"the engine's error", []string{chunk("ab"), `data: {"error":{"message":"the prompt is too long"}}` + "\n\n"}, -1, io.EOF, "ab", false, "the prompt is too long", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &stagedReader{parts: tc.parts, cancelAt: tc.cancelAt, end: tc.end}
			if tc.cancelAt >= 0 {
				r.cancel = cancel
			}
			var got strings.Builder
			res, broken, err := readChatStream(ctx, r, func(d string) error { got.WriteString(d); return nil })
			if res.Text != tc.wantText || got.String() != tc.wantText {
				t.Fatalf("text %q (deltas %q), want %q", res.Text, got.String(), tc.wantText)
			}
			if broken != tc.wantBroken {
				t.Fatalf("broken %v, want %v (err %v)", broken, tc.wantBroken, err)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
			case tc.wantIs != nil && !errors.Is(err, tc.wantIs):
				t.Fatalf("err %v, want errors.Is %v", err, tc.wantIs)
			}
			if tc.cancelAt >= 0 && err != nil && strings.Contains(err.Error(), "bad stream chunk") {
				t.Fatalf("a cancelled stream reads as a bad chunk: %v", err)
			}
		})
	}
}
