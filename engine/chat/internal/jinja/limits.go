// Added by vkllm (not in upstream ardanlabs/jinja): the bounds every render runs under.

package jinja

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Limits bound one render of a template. A template that reaches one stops with a *LimitError;
// zero fields take DefaultLimits' value.
type Limits struct {
	// MaxDepth bounds nested macro and caller() calls: a recursive macro stops here instead of
	// overflowing the Go stack (which would end the process).
	MaxDepth int
	// MaxSteps bounds the work of a render: every statement, expression and loop iteration is a
	// step, and so is every item a built-in builds or walks (range, join, sort, tojson, ...).
	MaxSteps int64
	// MaxBytes bounds the text a render builds in all: its output, the bodies of macros, set
	// and filter blocks, and the strings built by +, ~, *, join, replace, format and the
	// filters. Sizes are checked before a string is built where they can be known in advance.
	MaxBytes int64
	// Timeout bounds the wall time of a render.
	Timeout time.Duration
}

// DefaultLimits are generous for real chat templates and stop hostile ones within about a second.
// Measured on the 17 published templates under testdata/ with 200 messages: 4k to 200k steps
// (gemma-4's, quadratic in the messages, is the largest) and at most 4x the output's bytes.
var DefaultLimits = Limits{
	MaxDepth: 100,
	MaxSteps: 1_000_000,
	MaxBytes: 64 << 20,
	Timeout:  time.Second,
}

// Compile-time bounds. A template source above MaxSourceBytes, or nesting blocks or
// expressions deeper than MaxNesting, does not compile: the parser recurses once per level and
// must not overflow the stack either.
const (
	MaxSourceBytes = 1 << 20
	MaxNesting     = 200
)

// ErrLimit is wrapped by every *LimitError.
var ErrLimit = errors.New("template exceeded a render limit")

// LimitError says which limit a render reached.
type LimitError struct {
	Limit string // "recursion depth", "steps", "bytes", "time", "value nesting", "evaluation nesting"
	Max   int64  // the limit's value (nanoseconds for "time")
}

func (e *LimitError) Error() string {
	if e.Limit == "time" {
		return fmt.Sprintf("template rendering ran past its time limit of %v", time.Duration(e.Max))
	}
	return fmt.Sprintf("template rendering reached its %s limit of %d", e.Limit, e.Max)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

// maxValueNesting bounds how deep printing, JSON encoding and comparing walk nested lists and
// dicts (a list that contains itself is infinitely deep).
const maxValueNesting = 128

// maxFrames bounds how deeply the evaluator recurses through statements and expressions, macro
// calls included: the parser builds a left-leaning tree of any depth from a long chain such as
// a+a+a+..., and evaluating it must not exhaust the stack.
const maxFrames = 4096

// checkEvery is how many steps pass between checks of the clock and the context.
const checkEvery = 64

// budget is one render's account of its limits, shared by every evaluator of the render (macro
// bodies and blocks get their own output buffers but the same budget). The first breach sticks:
// code that cannot return an error (printing a value) records it, and the next step reports it.
type budget struct {
	ctx       context.Context
	lim       Limits
	deadline  time.Time
	steps     int64
	nextCheck int64
	bytes     int64
	depth     int // macro and caller() calls
	frames    int // evaluator recursion
	err       error
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxDepth > 0 {
		d.MaxDepth = l.MaxDepth
	}
	if l.MaxSteps > 0 {
		d.MaxSteps = l.MaxSteps
	}
	if l.MaxBytes > 0 {
		d.MaxBytes = l.MaxBytes
	}
	if l.Timeout > 0 {
		d.Timeout = l.Timeout
	}
	return d
}

func newBudget(ctx context.Context, lim Limits) *budget {
	if ctx == nil {
		ctx = context.Background()
	}
	lim = lim.withDefaults()
	return &budget{ctx: ctx, lim: lim, deadline: time.Now().Add(lim.Timeout)}
}

// fail records the first breach and returns it.
func (b *budget) fail(err error) error {
	if b.err == nil {
		b.err = err
	}
	return b.err
}

// step spends n steps, and every checkEvery steps looks at the clock and the context.
func (b *budget) step(n int64) error {
	if b.err != nil {
		return b.err
	}
	if n < 0 || n > b.lim.MaxSteps-b.steps {
		return b.fail(&LimitError{Limit: "steps", Max: b.lim.MaxSteps})
	}
	b.steps += n
	if b.steps >= b.nextCheck {
		b.nextCheck = b.steps + checkEvery
		if err := b.ctx.Err(); err != nil {
			return b.fail(fmt.Errorf("template rendering cancelled: %w", err))
		}
		if time.Now().After(b.deadline) {
			return b.fail(&LimitError{Limit: "time", Max: int64(b.lim.Timeout)})
		}
	}
	return nil
}

// alloc spends n bytes of text; call it before building a string of n bytes.
func (b *budget) alloc(n int64) error {
	if b.err != nil {
		return b.err
	}
	if n < 0 || n > b.lim.MaxBytes-b.bytes {
		return b.fail(&LimitError{Limit: "bytes", Max: b.lim.MaxBytes})
	}
	b.bytes += n
	return nil
}

// enter is a macro or caller() call one level deeper; leave undoes it.
func (b *budget) enter() error {
	if b.err != nil {
		return b.err
	}
	if b.depth >= b.lim.MaxDepth {
		return b.fail(&LimitError{Limit: "recursion depth", Max: int64(b.lim.MaxDepth)})
	}
	b.depth++
	return nil
}

func (b *budget) leave() { b.depth-- }

// push is one evaluator frame deeper (a statement or an expression); pop undoes it.
func (b *budget) push() error {
	if b.frames >= maxFrames {
		return b.fail(&LimitError{Limit: "evaluation nesting", Max: maxFrames})
	}
	b.frames++
	return nil
}

func (b *budget) pop() { b.frames-- }

// nested fails when a walk over a value is deeper than maxValueNesting.
func (b *budget) nested(depth int) error {
	if depth > maxValueNesting {
		return b.fail(&LimitError{Limit: "value nesting", Max: maxValueNesting})
	}
	return b.step(1)
}

// scratchBudget is for the few places that print a value outside a render (Value.String, error
// messages): small, so a cyclic or huge value cannot take long.
func scratchBudget() *budget {
	return newBudget(context.Background(), Limits{MaxSteps: 100_000, MaxBytes: 1 << 20})
}

// mulSize is a*b, saturated at math.MaxInt64 (sizes that large fail alloc).
func mulSize(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// addSize is a+b, saturated at math.MaxInt64.
func addSize(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
