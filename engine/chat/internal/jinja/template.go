// Modified by vkllm: Compile refuses sources over MaxSourceBytes, and every render runs under
// Limits (RenderContext; Render and RenderValues use DefaultLimits) with a shared budget, and
// turns a panic in the evaluator into an error.

package jinja

import (
	"context"
	"fmt"
	"strings"
)

// Template is a compiled Jinja template ready for rendering.
type Template struct {
	nodes []node
	src   string
}

// Compile parses a Jinja template source string and returns a compiled
// template that can be rendered multiple times with different data.
func Compile(source string) (*Template, error) {
	if len(source) > MaxSourceBytes {
		return nil, fmt.Errorf("jinja: template source of %d bytes exceeds the %d-byte limit", len(source), MaxSourceBytes)
	}
	segs, err := scan(source)
	if err != nil {
		return nil, fmt.Errorf("jinja scan: %w", err)
	}

	nodes, err := parseTemplate(segs)
	if err != nil {
		return nil, fmt.Errorf("jinja parse: %w", err)
	}

	return &Template{nodes: nodes, src: source}, nil
}

// Render executes the template with the provided data and returns the
// rendered string, under DefaultLimits. Each call creates an isolated scope
// so templates are safe to render concurrently after compilation.
func (t *Template) Render(data map[string]any) (string, error) {
	return t.RenderContext(context.Background(), data, DefaultLimits)
}

// RenderContext is Render under lim (zero fields take DefaultLimits'), ending early with the
// context's error when ctx ends and with a *LimitError when the template reaches a limit.
func (t *Template) RenderContext(ctx context.Context, data map[string]any, lim Limits) (string, error) {
	// Convert Go data to Value types.
	vals := make(map[string]Value, len(data))
	for k, v := range data {
		vals[k] = FromGoValue(v)
	}

	return render(t.nodes, vals, newBudget(ctx, lim))
}

// RenderValues is like Render but accepts pre-converted Value data.
func (t *Template) RenderValues(data map[string]Value) (string, error) {
	return render(t.nodes, data, newBudget(context.Background(), DefaultLimits))
}

// =============================================================================

// render executes the AST with the given data and returns the result.
func render(nodes []node, data map[string]Value, b *budget) (out string, err error) {
	// A panic in the evaluator (a bug, or a case its checks missed) must not end the process
	// that renders a model file's template.
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("jinja: template rendering failed: %v", r)
		}
	}()

	e := evaluator{
		output: strings.Builder{},
		b:      b,
	}

	// Use the cached builtins scope directly. The scope is initialized
	// once at package init and is only read after that (lookupFilter,
	// chained get() through parent links, passed to nested evaluators).
	// No code path writes to e.builtins, so sharing the cached scope
	// across renders is safe and avoids cloning ~20 entries per render.
	e.builtins = cachedBuiltins

	// Create user data scope on top of builtins.
	e.scope = newScope(e.builtins)
	for k, v := range data {
		e.scope.set(k, v)
	}

	if err := e.execNodes(nodes); err != nil {
		return "", err
	}
	if b.err != nil { // a breach recorded where no error could be returned
		return "", b.err
	}

	return e.output.String(), nil
}
