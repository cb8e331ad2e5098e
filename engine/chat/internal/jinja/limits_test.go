// Added by vkllm: hostile templates stop at a limit, quickly, with the process alive.

package jinja

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// hostile templates and the limit each must reach. Each would crash the process (a stack
// overflow is fatal), exhaust memory or run for minutes in upstream v1.8.0. "steps|time": the
// loops that spend one step at a time reach whichever comes first on a loaded machine.
var hostile = []struct {
	name, src, limit string
}{
	{"recursive macro", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, "recursion depth"},
	{"mutually recursive macros", `{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}`, "recursion depth"},
	{"macro calling itself through call", `{% macro m() %}{% call m() %}x{% endcall %}{% endmacro %}{{ m() }}`, "recursion depth"},
	{"range of a billion", `{% for i in range(1000000000) %}{% endfor %}`, "steps"},
	{"range of a billion as a float", `{% for i in range(10 ** 9) %}{{ i }}{% endfor %}`, "steps"},
	{"range of the whole int64", `{{ range(-9223372036854775807, 9223372036854775807)|length }}`, "steps"},
	{"string times two billion", `{{ 'a' * 2000000000 }}`, "bytes"},
	{"nested loops", `{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}`, "steps|time"},
	{"nested empty loops", `{% for i in range(1500) %}{% for j in range(1500) %}{% endfor %}{% endfor %}`, "steps|time"},
	{"doubling string", `{% set s = 'ab' %}{% for i in range(64) %}{% set s = s ~ s %}{% endfor %}{{ s|length }}`, "bytes"},
	{"doubling namespace string", `{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}`, "bytes"},
	{"doubling list", `{% set l = [1] %}{% for i in range(64) %}{% set l = l + l %}{% endfor %}{{ l|length }}`, "steps"},
	{"list that contains itself, printed", `{% set l = [] %}{% set _ = l.append(l) %}{{ l }}`, "value nesting"},
	{"list that contains itself, as JSON", `{% set l = [] %}{% set _ = l.append(l) %}{{ l|tojson }}`, "value nesting"},
	{"list that contains itself, compared", `{% set l = [] %}{% set _ = l.append(l) %}{{ l == l }}`, "value nesting"},
	{"namespace that contains itself", `{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns }}`, "value nesting"},
	{"shared list doubling when printed", `{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}`, "steps"},
	{"replace multiplies", `{{ ('a' * 100000)|replace('a', 'b' * 100000) }}`, "bytes"},
	{"replace method multiplies", `{{ ('a' * 100000).replace('a', 'b' * 100000) }}`, "bytes"},
	{"join of one long string many times", `{% set s = 'a' * 1000000 %}{% set l = [] %}{% for i in range(100000) %}{% set _ = l.append(s) %}{% endfor %}{{ l|join }}`, "bytes"},
	{"indent multiplies", `{{ ('a\n' * 100000)|indent(100000) }}`, "bytes"},
	{"format multiplies", `{{ ('{0}' * 100000).format('a' * 100000) }}`, "bytes"},
	{"tojson indent multiplies", `{{ range(1000)|list|tojson(indent=100000000) }}`, "bytes"},
	{"tojson indent of ten billion", `{{ []|tojson(indent=10000000000) }}`, "bytes"},
	{"sort of a million", `{{ range(1000000)|sort|length }}`, "steps"},
	{"long chain of additions", `{{ 1` + strings.Repeat(" + 1", 100000) + ` }}`, "evaluation nesting"},
}

func TestHostileTemplatesStopAtALimitQuickly(t *testing.T) {
	for _, c := range hostile {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := Compile(c.src)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			start := time.Now()
			out, err := tmpl.RenderContext(context.Background(), nil, Limits{})
			took := time.Since(start)
			var le *LimitError
			if !errors.As(err, &le) || !errors.Is(err, ErrLimit) {
				t.Fatalf("render = %d bytes, %v; want a *LimitError", len(out), err)
			}
			if !slices.Contains(strings.Split(c.limit, "|"), le.Limit) {
				t.Errorf("reached the %s limit, want %s (%v)", le.Limit, c.limit, err)
			}
			if took > 2*time.Second {
				t.Errorf("took %v, want under 2s", took)
			}
		})
	}
}

func TestHostileSourcesDoNotCompile(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"parentheses nested 100000 deep", "{{ " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}", "nested deeper than"},
		{"not repeated 200000 times", "{{ " + strings.Repeat("not ", 200000) + "x }}", "nested deeper than"},
		{"minus repeated 200000 times", "{{ " + strings.Repeat("- ", 200000) + "1 }}", "nested deeper than"},
		{"lists nested 100000 deep", "{{ " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + " }}", "nested deeper than"},
		{"if blocks nested 10000 deep", strings.Repeat("{% if true %}", 10000) + strings.Repeat("{% endif %}", 10000), "blocks nested deeper than"},
		{"source over a MiB", strings.Repeat("a", MaxSourceBytes+1), "exceeds the"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Compile(c.src)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Compile: %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// Odd but harmless templates render as Python's Jinja would, without a limit or a panic.
func TestOddTemplatesRenderWithoutPanicking(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"negative repeat", `[{{ 'a' * -1 }}]`, "[]"},
		{"float repeat is arithmetic", `{{ 'a' * 2.5 }}`, "0"},
		{"negative indent width", `{{ 'a\nb'|indent(-5) }}`, "a\nb"},
		{"slice far past the end with a step", `{{ 'abcde'[0:1000000000000000:2] }}`, "ace"},
		{"slice far before the start", `{{ [1, 2, 3][-1000000000000:2] }}`, "[1, 2]"},
		{"reverse slice with a huge step", `{{ [1, 2, 3][::-1000000000000] }}`, "[3]"},
		{"reverse slice of a non-ASCII string", `{{ 'añb'[::-1] }}`, "bña"},
		{"index of a non-ASCII string", `{{ 'añb'[1] }}{{ 'añb'[-1] }}`, "ñb"},
		{"range counting down", `{{ range(5, 0, -2)|list }}`, "[5, 3, 1]"},
		{"self-containing list, its length", `{% set l = [] %}{% set _ = l.append(l) %}{{ l|length }}`, "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := Compile(c.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(nil)
			if err != nil || got != c.want {
				t.Fatalf("Render = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestRenderStopsAtItsTimeout(t *testing.T) {
	tmpl, err := Compile(`{% for i in range(2000) %}{% for j in range(2000) %}{% for k in range(2000) %}{% endfor %}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = tmpl.RenderContext(context.Background(), nil, Limits{MaxSteps: 1 << 50, Timeout: 50 * time.Millisecond})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "time" {
		t.Fatalf("render: %v, want the time limit", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v with a 50ms timeout", took)
	}
}

func TestRenderEndsWhenItsContextIsCancelled(t *testing.T) {
	tmpl, err := Compile(`{% for i in range(2000) %}{% for j in range(2000) %}{% for k in range(2000) %}{% endfor %}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err = tmpl.RenderContext(ctx, nil, Limits{MaxSteps: 1 << 50, Timeout: time.Minute})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("render: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v after a cancel at 20ms", took)
	}
}

// The bounds must not get in the way of real templates: a published one with a long
// conversation renders under the defaults, and a limit set just below what it needs is reached.
func TestRealTemplateFitsTheDefaultsAndTheLimitsAreTight(t *testing.T) {
	src := "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"
	tmpl, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []any
	for i := range 2000 {
		role := []string{"user", "assistant"}[i%2]
		msgs = append(msgs, map[string]any{"role": role, "content": strings.Repeat("word ", 100)})
	}
	data := map[string]any{"messages": msgs}
	out, err := tmpl.RenderContext(context.Background(), data, Limits{})
	if err != nil {
		t.Fatalf("2000 messages under the defaults: %v", err)
	}
	if !strings.HasSuffix(out, "<|im_start|>assistant\n") || len(out) < 2000*500 {
		t.Fatalf("rendered %d bytes ending %q", len(out), out[max(0, len(out)-30):])
	}
	_, err = tmpl.RenderContext(context.Background(), data, Limits{MaxBytes: int64(len(out)) / 2})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "bytes" {
		t.Errorf("half the bytes it needs: %v, want the bytes limit", err)
	}
	_, err = tmpl.RenderContext(context.Background(), data, Limits{MaxSteps: 1000})
	if !errors.As(err, &le) || le.Limit != "steps" {
		t.Errorf("1000 steps: %v, want the steps limit", err)
	}
}
