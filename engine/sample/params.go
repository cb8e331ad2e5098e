// Package sample turns logits into the next token: greedy, temperature, top-k, top-p, min-p,
// repetition penalty, all reproducible from a seed.
package sample

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
