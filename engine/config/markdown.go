package config

import (
	"fmt"
	"strings"
)

// Markdown renders the declared variables as the table in docs/ENV.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("# Environment variables\n\nGenerated from engine/config by `vkllm env --markdown`; do not edit by hand.\n\n")
	b.WriteString("| variable | type | default | meaning |\n| --- | --- | --- | --- |\n")
	for _, v := range All() {
		def := v.Default
		if def == "" {
			def = "(unset)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, v.Kind, def, v.Meaning)
	}
	return b.String()
}
