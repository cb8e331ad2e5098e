// Package engine is the one entry point the CLI, the sidecar and the bench use to load a model and
// generate from it. Everything below (gguf, tokenizer, chat, model, cpu, vulkan, plan, sample) is
// reached through here.
package engine

import (
	"context"
	"time"

	"github.com/vkllm/vkllm/engine/sample"
)

// Backend selects where the forward pass runs.
type Backend string

const (
	BackendAuto Backend = "auto" // the GPU when the resident plan arms, else the fallback
	BackendCPU  Backend = "cpu"
	BackendGPU  Backend = "gpu"
)

// LoadOptions say which model to load and where to run it.
type LoadOptions struct {
	Path        string  // GGUF file (first split for split models); "" loads the embedded default model
	Backend     Backend // "" means BackendAuto
	Context     int     // requested context length; 0 = the model's own, capped by the plan
	Threads     int     // CPU threads; 0 = all cores (VKLLM_THREADS)
	DeviceIndex int     // Vulkan device; -1 = choose (VKLLM_DEVICE)
	// KV is the KV cache's element type: "" or "f16" (every backend), "f32" (the CPU reference
	// only; KVTypes lists them).
	KV string

	// StoredPinMB returns the per-machine VRAM pin saved for a GPU (by its device key), 0 when
	// none. nil consults no stored pins. VKLLM_GPU_VRAM_MB wins over it and says so.
	StoredPinMB func(ctx context.Context, deviceKey string) int
}

// ModelInfo describes a loaded model for the UI, the bench and the API.
type ModelInfo struct {
	Name          string `json:"name"`           // file base name
	Path          string `json:"path"`           // "" for the embedded model
	Arch          string `json:"arch"`           // general.architecture
	Params        int64  `json:"params"`         // total parameter count
	FileSize      int64  `json:"file_size"`      // bytes on disk
	Quant         string `json:"quant"`          // dominant tensor type, e.g. "Q8_0"
	ContextLength int    `json:"context_length"` // training context from metadata
	Context       int    `json:"context"`        // context in use
	Layers        int    `json:"layers"`
	Dim           int    `json:"dim"`
	VocabSize     int    `json:"vocab_size"`
	Backend       string `json:"backend"`   // "cpu", "vulkan"
	Placement     string `json:"placement"` // "resident", "split L of M", "cpu"
	HasTemplate   bool   `json:"has_chat_template"`
	CPUReason     string `json:"cpu_reason,omitempty"` // on the CPU: why, one sentence for the user (a setting, no device, the plan's verdict); "" on a GPU
	// GPUSetup is how long of the load went to the GPU's instance and device (0 on the CPU).
	GPUSetup time.Duration `json:"gpu_setup_ns,omitempty"`
}

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"` // system, user, assistant
	Content string `json:"content"`
}

// GenerateRequest is one completion (Prompt) or chat (Messages) request.
type GenerateRequest struct {
	Prompt    string    // raw text, tokenized with BOS as the model says
	Messages  []Message // rendered with the model's chat template when Prompt is empty
	MaxTokens int       // 0 = until EOS or the context is full
	Sampling  sample.Params
	Stop      []string // generation ends before any of these strings; they are not emitted

	// PromptTokens, when set, is the prompt already tokenized (by Engine.PromptTokens, before
	// the request's turn); Prompt and Messages are then not looked at.
	PromptTokens []int
}

// Piece is one generated token as it streams out. Text may be empty while a multi-byte
// character or a possible stop string is held back. A last Piece with ID -1 releases text still
// held back when the generation ends without a stop string.
type Piece struct {
	ID   int    `json:"id"`
	Text string `json:"text"`
}

// Timings of one generation.
type Timings struct {
	PromptTokens    int           `json:"prompt_tokens"` // prompt tokens evaluated (a cached prefix is not)
	GeneratedTokens int           `json:"generated_tokens"`
	Prompt          time.Duration `json:"prompt_ns"`
	Generation      time.Duration `json:"generation_ns"`
	TimeToFirst     time.Duration `json:"ttft_ns"`
	PromptPerSec    float64       `json:"prompt_tps"`
	GenPerSec       float64       `json:"gen_tps"` // decode steps (generated tokens after the first) per second
}

// StopReason says why a generation ended.
type StopReason string

const (
	StopLength    StopReason = "length"    // MaxTokens or the context reached
	StopEOS       StopReason = "eos"       // an end-of-generation token
	StopString    StopReason = "stop"      // a stop string matched
	StopCancelled StopReason = "cancelled" // the context was cancelled
)

// Result is everything one generation produced.
type Result struct {
	PromptTokens []int      `json:"prompt_tokens"`
	Generated    []int      `json:"generated"`
	Text         string     `json:"text"`
	Stop         StopReason `json:"stop_reason"`
	Timings      Timings    `json:"timings"`
}
