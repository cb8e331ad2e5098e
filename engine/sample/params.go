// Package sample turns logits into the next token: greedy, temperature, top-k, top-p, min-p,
// repetition penalty, all reproducible from a seed.
package sample

import (
	"fmt"
	"math"
)

// Params are the sampling settings of one generation. The zero value is greedy decoding.
type Params struct {
	Temperature   float32 `json:"temperature"`    // 0 = greedy (argmax)
	TopK          int     `json:"top_k"`          // 0 = off
	TopP          float32 `json:"top_p"`          // 0 or 1 = off
	MinP          float32 `json:"min_p"`          // 0 = off
	RepeatPenalty float32 `json:"repeat_penalty"` // 0 or 1 = off
	RepeatLastN   int     `json:"repeat_last_n"`  // window the penalty looks back over; 0 = 64
	Seed          uint64  `json:"seed"`           // 0 = a seed drawn from the clock
}

// Greedy reports whether these settings always pick the most likely token.
func (p Params) Greedy() bool { return p.Temperature <= 0 }

// Validate reports the first setting out of range, naming it as the JSON field.
func (p Params) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%s %v is out of range: want %s", field, v, want)
	}
	finite := func(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
	switch {
	case !finite(p.Temperature) || p.Temperature < 0:
		return bad("temperature", p.Temperature, "0 or more (0 is greedy)")
	case p.TopK < 0:
		return bad("top_k", p.TopK, "0 or more (0 is off)")
	case !finite(p.TopP) || p.TopP < 0 || p.TopP > 1:
		return bad("top_p", p.TopP, "0 to 1")
	case !finite(p.MinP) || p.MinP < 0 || p.MinP > 1:
		return bad("min_p", p.MinP, "0 to 1")
	case !finite(p.RepeatPenalty) || p.RepeatPenalty < 0:
		return bad("repeat_penalty", p.RepeatPenalty, "0 or more (0 and 1 are off)")
	case p.RepeatLastN < 0:
		return bad("repeat_last_n", p.RepeatLastN, "0 or more (0 looks back 64 tokens)")
	}
	return nil
}
