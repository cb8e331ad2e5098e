// Package shaders holds vkllm's GLSL compute shaders and their compiled SPIR-V, embedded in
// the binary. Regenerate the SPIR-V with ./gen.sh (go generate ./shaders) after editing a
// .comp file; a test checks the committed SPIR-V is current when glslc is available.
package shaders

import (
	"embed"
	"fmt"
)

//go:generate ./gen.sh

//go:embed spv/*.spv
var spv embed.FS

// SPIRV returns the compiled module of the shader name (its .comp file's base name).
func SPIRV(name string) ([]byte, error) {
	b, err := spv.ReadFile("spv/" + name + ".spv")
	if err != nil {
		return nil, fmt.Errorf("embedded shader %q: %w (run shaders/gen.sh)", name, err)
	}
	return b, nil
}

// Names lists the embedded shaders.
func Names() ([]string, error) {
	ents, err := spv.ReadDir("spv")
	if err != nil {
		return nil, fmt.Errorf("list embedded shaders: %w", err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if len(n) > 4 && n[len(n)-4:] == ".spv" {
			out = append(out, n[:len(n)-4])
		}
	}
	return out, nil
}
