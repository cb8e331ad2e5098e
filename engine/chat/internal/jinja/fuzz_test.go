// Added by vkllm: any template source compiles or not, and renders or not, within its limits.

package jinja

import (
	"context"
	"strings"
	"testing"
	"time"
)

// FuzzRender feeds template sources to Compile and RenderContext under small limits. A render
// must end within its time limit (with slack for a loaded machine), build no more than its byte
// limit, and never need the panic recovery (an error saying "rendering failed" is an evaluator
// bug). The seeds are the hostile templates of limits_test.go and a few ordinary ones; the
// corpus under testdata/fuzz/FuzzRender holds inputs worth keeping. A short run:
//
//	go test ./engine/chat/internal/jinja -run '^$' -fuzz FuzzRender -fuzztime 30s
func FuzzRender(f *testing.F) {
	for _, c := range hostile {
		f.Add(c.src)
	}
	for _, src := range []string{
		"{% for m in messages %}{{ m.role }}: {{ m.content | trim }}\n{% endfor %}",
		"{{ messages | tojson }}{{ messages[0].content[::-1] }}{{ messages | map(attribute='role') | join(',') }}",
		"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}",
		"{% macro m(x) %}[{{ caller() }}{{ x }}]{% endmacro %}{% call m(1) %}c{% endcall %}",
		"{{ 'a{0}b{}'.format(1, 2) | replace('a', 'xy') | indent(2, true) | upper }}",
	} {
		f.Add(src)
	}
	lim := Limits{MaxSteps: 100_000, MaxBytes: 1 << 20, Timeout: 100 * time.Millisecond}
	data := map[string]any{
		"messages": []any{
			map[string]any{"role": "system", "content": "Be brief."},
			map[string]any{"role": "user", "content": " Hello, wörld! "},
		},
		"add_generation_prompt": true,
		"bos_token":             "<s>",
	}
	f.Fuzz(func(t *testing.T, src string) {
		var tmpl *Template
		var err error
		compiled := make(chan error, 1)
		go func() {
			t, err := Compile(src)
			tmpl = t
			compiled <- err
		}()
		select {
		case err := <-compiled:
			if err != nil {
				return
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("Compile(%q) still running after 2s", src)
		}
		start := time.Now()
		var out string
		rendered := make(chan struct{})
		go func() {
			out, err = tmpl.RenderContext(context.Background(), data, lim)
			close(rendered)
		}()
		select {
		case <-rendered:
		case <-time.After(2 * time.Second):
			t.Fatalf("rendering %q still running after 2s under a %v limit", src, lim.Timeout)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("render took %v under a %v limit", took, lim.Timeout)
		}
		if int64(len(out)) > lim.MaxBytes {
			t.Fatalf("rendered %d bytes under a %d-byte limit", len(out), lim.MaxBytes)
		}
		if err != nil && strings.Contains(err.Error(), "rendering failed") {
			t.Fatalf("the evaluator panicked: %v", err)
		}
	})
}
