package config

import (
	"os"
	"strings"
	"testing"
)

func TestIntFallsBackToDefaultOnBadValue(t *testing.T) {
	tests := []struct {
		name, value string
		want        int
	}{
		{"unset uses default", "", 4096},
		{"number parses", "512", 512},
		{"garbage falls back", "lots", 4096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(GPUMinCtx.Name, tc.value)
			if got := GPUMinCtx.Int(); got != tc.want {
				t.Fatalf("Int() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBoolParsesCommonSpellings(t *testing.T) {
	tests := []struct {
		value string
		want  bool
	}{{"1", true}, {"on", true}, {"false", false}, {"0", false}, {"maybe", true}}
	for _, tc := range tests {
		t.Setenv(GPUResident.Name, tc.value)
		if got := GPUResident.Bool(); got != tc.want {
			t.Errorf("Bool(%q) = %v, want %v", tc.value, got, tc.want)
		}
	}
}

func TestEveryVariableIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ENV.md")
	if err != nil {
		t.Fatalf("read docs/ENV.md: %v (regenerate with: go run ./cmd/vkllm env --markdown > docs/ENV.md)", err)
	}
	if string(doc) != Markdown() {
		t.Fatalf("docs/ENV.md is stale; regenerate with: go run ./cmd/vkllm env --markdown > docs/ENV.md")
	}
	for _, v := range All() {
		if !strings.HasPrefix(v.Name, "VKLLM_") || v.Meaning == "" {
			t.Errorf("variable %q needs the VKLLM_ prefix and a meaning", v.Name)
		}
	}
}
