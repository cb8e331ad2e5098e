package cpu

import "github.com/vkllm/vkllm/engine/model"

// Snapshots of the recurrent state kept per kind: a prompt's (multi-token) evaluation leaves
// two (before its last token and after it), a decode step one.
const (
	promptSnapshots = 6
	decodeSnapshots = 2
)

// layerState is one Gated DeltaNet layer's memory of the tokens so far.
type layerState struct {
	conv []float32 // the last ConvKernel-1 inputs of every channel, oldest first: (ConvKernel-1) × ConvDim
	ssm  []float32 // VHeads states of StateSize×StateSize, each stored transposed
}

// snapshot is the recurrent state after the first pos tokens.
type snapshot struct {
	pos    int
	decode bool // left by a one-token evaluation
	layers []layerState
}

// recurrentState is the memory of a model's recurrent layers. Unlike a KV cache it cannot drop
// its last positions: each layer's state folds in every token. To go back to an earlier
// position the runner restores the latest snapshot at or before it and evaluates again the
// tokens from there (it remembers every token it has evaluated), from position 0 when none
// is left.
type recurrentState struct {
	index   []int // model layer -> its entry in layers, -1 for attention layers
	layers  []layerState
	pos     int   // tokens folded in
	history []int // the tokens at positions 0..pos-1
	snaps   []*snapshot
}

func newRecurrentState(h model.Hyperparameters) *recurrentState {
	rs := &recurrentState{index: make([]int, h.Layers)}
	p := h.SSM
	for l := range rs.index {
		rs.index[l] = -1
		if h.IsRecurrent(l) {
			rs.index[l] = len(rs.layers)
			rs.layers = append(rs.layers, layerState{
				conv: make([]float32, (p.ConvKernel-1)*p.ConvDim()),
				ssm:  make([]float32, p.VHeads*p.StateSize*p.StateSize),
			})
		}
	}
	return rs
}

// layer is the state of model layer l (a recurrent one).
func (rs *recurrentState) layer(l int) *layerState { return &rs.layers[rs.index[l]] }

// reset empties the state: no token folded in, no snapshot.
func (rs *recurrentState) reset() {
	for i := range rs.layers {
		clear(rs.layers[i].conv)
		clear(rs.layers[i].ssm)
	}
	rs.pos, rs.history, rs.snaps = 0, rs.history[:0], nil
}

// advance records that tokens were folded in after the current position.
func (rs *recurrentState) advance(tokens []int) {
	rs.history = append(rs.history[:rs.pos], tokens...)
	rs.pos += len(tokens)
}

// save keeps a snapshot of the current state. Past its kind's limit the oldest snapshot of
// that kind makes room (its buffers are reused); one at the same position is replaced.
func (rs *recurrentState) save(decode bool) {
	limit := promptSnapshots
	if decode {
		limit = decodeSnapshots
	}
	var reuse *snapshot
	kept, oldest, count := rs.snaps[:0], -1, 0
	for _, s := range rs.snaps {
		if s.pos == rs.pos {
			reuse = s
			continue
		}
		kept = append(kept, s)
	}
	rs.snaps = kept
	for i, s := range rs.snaps {
		if s.decode == decode {
			count++
			if oldest < 0 || s.pos < rs.snaps[oldest].pos {
				oldest = i
			}
		}
	}
	if reuse == nil && count >= limit {
		reuse = rs.snaps[oldest]
		rs.snaps = append(rs.snaps[:oldest], rs.snaps[oldest+1:]...)
	}
	if reuse == nil {
		reuse = &snapshot{layers: make([]layerState, len(rs.layers))}
		for i, l := range rs.layers {
			reuse.layers[i] = layerState{conv: make([]float32, len(l.conv)), ssm: make([]float32, len(l.ssm))}
		}
	}
	reuse.pos, reuse.decode = rs.pos, decode
	for i, l := range rs.layers {
		copy(reuse.layers[i].conv, l.conv)
		copy(reuse.layers[i].ssm, l.ssm)
	}
	rs.snaps = append(rs.snaps, reuse)
}

// rewind goes back to pos (at most the current position): it restores the latest snapshot at or
// before pos (the empty state when there is none), forgets every snapshot after pos, and returns
// the position it restored and the remembered tokens from there to pos, which the caller must
// evaluate again.
func (rs *recurrentState) rewind(pos int) (from int, replay []int) {
	var best *snapshot
	kept := rs.snaps[:0]
	for _, s := range rs.snaps {
		if s.pos > pos {
			continue
		}
		kept = append(kept, s)
		if best == nil || s.pos > best.pos {
			best = s
		}
	}
	rs.snaps = kept
	replay = append([]int(nil), rs.history[:pos]...)
	if best == nil {
		for i := range rs.layers {
			clear(rs.layers[i].conv)
			clear(rs.layers[i].ssm)
		}
		rs.pos, rs.history = 0, rs.history[:0]
		return 0, replay
	}
	for i := range rs.layers {
		copy(rs.layers[i].conv, best.layers[i].conv)
		copy(rs.layers[i].ssm, best.layers[i].ssm)
	}
	rs.pos, rs.history = best.pos, rs.history[:best.pos]
	return best.pos, replay[best.pos:]
}
