// Package library finds the GGUF models already on this machine — in llama.cpp's cache, LM
// Studio's models folder, Ollama's blob store, the Hugging Face hub cache and folders the user
// adds — and describes each from its header alone (gguf.OpenHeader: no weight is read). A scan
// is incremental: a file whose size and modification time are those of the last scan is not
// read again. It knows nothing of the store; the caller keeps what Scan returns.
package library

import (
	"os"
	"path/filepath"
)

// Sources: the kind of folder a model was found in.
const (
	SourceLlamaCpp    = "llama.cpp"
	SourceLMStudio    = "lmstudio"
	SourceOllama      = "ollama"
	SourceHuggingFace = "huggingface"
	SourceFolder      = "folder" // a folder the user added
)

// Root is one folder to scan and how its models are laid out.
type Root struct {
	Path   string `json:"path"`
	Source string `json:"source"`
}

// DefaultRoots are the folders other tools keep their models in under home, honouring the
// environment variables those tools read (LLAMA_CACHE, XDG_CACHE_HOME, OLLAMA_MODELS, HF_HUB_CACHE,
// HF_HOME). getenv is os.Getenv outside tests. Folders that do not exist are listed too: a scan
// skips them.
func DefaultRoots(home string, getenv func(string) string) []Root {
	cache := getenv("XDG_CACHE_HOME")
	if cache == "" {
		cache = filepath.Join(home, ".cache")
	}
	llama := getenv("LLAMA_CACHE")
	if llama == "" {
		llama = filepath.Join(cache, "llama.cpp")
	}
	ollama := getenv("OLLAMA_MODELS")
	if ollama == "" {
		ollama = filepath.Join(home, ".ollama", "models")
	}
	hub := getenv("HF_HUB_CACHE")
	if hub == "" {
		if hf := getenv("HF_HOME"); hf != "" {
			hub = filepath.Join(hf, "hub")
		} else {
			hub = filepath.Join(cache, "huggingface", "hub")
		}
	}
	return []Root{
		{Path: llama, Source: SourceLlamaCpp},
		{Path: filepath.Join(home, ".lmstudio", "models"), Source: SourceLMStudio},
		{Path: filepath.Join(cache, "lm-studio", "models"), Source: SourceLMStudio},
		{Path: ollama, Source: SourceOllama},
		{Path: hub, Source: SourceHuggingFace},
	}
}

// SystemRoots is DefaultRoots for this user's home folder and environment.
func SystemRoots() []Root {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	return DefaultRoots(home, os.Getenv)
}
