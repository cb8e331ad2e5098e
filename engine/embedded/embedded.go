// Package embedded carries the default model compiled into every vkllm binary, so chat works with
// nothing downloaded: Karpathy's tinyllamas stories260K (MIT), a 260K-parameter llama trained on
// TinyStories.
package embedded

import _ "embed"

// Name is the file name the embedded model is shown under.
const Name = "stories260K.gguf"

// ModelGGUF is the whole GGUF file.
//
//go:embed stories260K.gguf
var ModelGGUF []byte
