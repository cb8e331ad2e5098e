package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// captureRunOutput runs f with os.Stdout redirected and returns what it printed.
func captureRunOutput(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	ferr := f()
	os.Stdout = old
	w.Close()
	return <-done, ferr
}

func TestRunJSONPrintsOneObject(t *testing.T) {
	out, err := captureRunOutput(t, func() error {
		return runRun(context.Background(), []string{"--cpu", "-p", "Once upon a time", "-n", "6", "--json"})
	})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		PromptTokens []int          `json:"prompt_tokens"`
		Generated    []int          `json:"generated"`
		Text         string         `json:"text"`
		Timings      map[string]any `json:"timings"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if len(got.PromptTokens) != 5 || len(got.Generated) != 6 || !strings.HasPrefix(got.Text, ", there was") || got.Timings["gen_tps"] == nil {
		t.Fatalf("result %+v", got)
	}
}

func TestRunStreamsPromptAndContinuation(t *testing.T) {
	out, err := captureRunOutput(t, func() error {
		return runRun(context.Background(), []string{"--cpu", "-p", "Once upon a time", "-n", "4"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "Once upon a time, there was") {
		t.Fatalf("output %q", out)
	}
}

func TestRunUsageErrors(t *testing.T) {
	cases := [][]string{
		{"-n", "3"},
		{"-p", "x", "--gpu", "--cpu"},
		{"-p", "x", "-n", "-1"},
	}
	for _, args := range cases {
		if err := runRun(context.Background(), args); !errors.Is(err, errUsage) {
			t.Fatalf("%v: err %v, want a usage error", args, err)
		}
	}
}

func TestTokenizePrintsIDs(t *testing.T) {
	out, err := captureRunOutput(t, func() error { return runTokenize(context.Background(), []string{"Once upon a time"}) })
	if err != nil || strings.TrimSpace(out) != "1 403 407 261 378" {
		t.Fatalf("output %q err %v", out, err)
	}
	out, err = captureRunOutput(t, func() error { return runTokenize(context.Background(), []string{"--no-bos", "Once upon a time"}) })
	if err != nil || strings.TrimSpace(out) != "403 407 261 378" {
		t.Fatalf("--no-bos output %q err %v", out, err)
	}
}
