package vulkan

import (
	"errors"
	"fmt"

	vk "github.com/vulkan-go/vulkan"

	"github.com/vkllm/vkllm/engine/sample"
)

// Greedy generation, one step queued ahead (VKLLM_GPU_CHAIN). A plain decode step is a submit,
// a wait for its fence, a 4-byte read of the argmax and the host's writes of the next token's
// inputs: the GPU idles for that round trip every token. The chain records the step twice,
// each recording on its own input slot (token id, position, rope angles, argmax) and ending
// with a copy of its argmax into the other slot's token id. Greedy(token, pos) submits its step,
// then at once the step at pos+1 on the other slot, whose token the device fills in, and only
// then waits for its own. When the caller's next call is Greedy(the argmax it got, pos+1), as a
// greedy generation's is, that step is already queued or running.
//
// A step queued ahead that the caller does not take (a stop token, a stop string, a length
// limit, any other call) has written the keys and values of a token at pos+1 that the caller
// never committed: attention reads only positions before the current one, so the next
// evaluation at that position overwrites them unseen. Every other entry point waits for it
// first (settle). The recurrent hybrids are left out: a step ahead would advance their state.

// chainSlot is one recording of the decode step and its input slot.
type chainSlot struct {
	seq                    *Seq
	ids, pos, ropeCS, best *Buffer // host-visible: the token id (the other slot's copy fills it), position, rope angles, argmax (a sampled chain's: the token and sample_token's status)
	u, logits              *Buffer // a sampled chain's: the draw's uniform, the step's logits (device memory; sample.go)
	fence                  vk.Fence
	pending                bool // submitted and not yet waited for
}

// decodeChain is the resident driver's pair of slots and the step queued ahead: greedy steps
// (r.chain) or sampled ones (r.sampled, sample.go).
type decodeChain struct {
	slots    [2]chainSlot
	ahead    int // the slot whose step was queued ahead, -1: none
	aheadPos int // its position
	aheadTok int // its token: the argmax (or draw) of the step before it, which the device copied in
	queued   int // steps queued ahead (tests)
	taken    int // of those, steps the caller took

	sampled    bool
	cfg        *Buffer         // host-visible: sample_token's settings (temperature, top-k, top-p, min-p)
	cfgWords   []uint32        // what cfg holds (sampleSettings); nil until written
	aheadU     float32         // the uniform the step queued ahead draws with
	host       *sample.Sampler // the host's draw where sample_token hands it back
	hostDraws  int             // draws the host made (tests)
	lastByHost bool            // the latest step's draw was the host's: the next queues none ahead
}

// chains reports whether greedy steps run chained on this runner: the switch on, the whole
// model with its head, no recurrent layers, no per-stage profile, no routing capture.
func (r *Resident) chains() bool {
	return r.c.chain && !r.part && r.hasHead && len(r.h.Recurrent) == 0 && !r.prof && !r.captures
}

// ChainsGreedy reports whether Greedy queues each step behind the one before (VKLLM_GPU_CHAIN on
// a runner that chains): how a greedy generation's steps run, for the bench's records.
func (r *Resident) ChainsGreedy() bool { return r.chains() }

// chainReady records the greedy chain's two slots on first use.
func (r *Resident) chainReady() (*decodeChain, error) { return r.chainFor(false) }

// chainFor records the greedy or the sampled chain's two slots on first use.
func (r *Resident) chainFor(sampled bool) (*decodeChain, error) {
	at := &r.chain
	if sampled {
		at = &r.sampled
	}
	if *at != nil {
		return *at, nil
	}
	ch := &decodeChain{ahead: -1, sampled: sampled}
	fail := func(err error) (*decodeChain, error) {
		ch.free(r.c)
		return nil, fmt.Errorf("record the chained decode steps: %w", err)
	}
	type sized struct {
		dst **Buffer
		n   int
	}
	if sampled {
		cfg, err := r.c.NewBuffer(16, true)
		if err != nil {
			return fail(err)
		}
		ch.cfg = cfg
	}
	bestWords := 1 // the argmax; a sampled chain's: the token and sample_token's status
	if sampled {
		bestWords = 2
	}
	for i := range ch.slots {
		sl := &ch.slots[i]
		bufs := []sized{{&sl.ids, 1}, {&sl.pos, 1}, {&sl.ropeCS, max(2, r.ropeDims)}, {&sl.best, bestWords}}
		if sampled {
			bufs = append(bufs, sized{&sl.u, 1})
			// a sampled step's logits stay in device memory, where sample_token reads them
			buf, err := r.c.NewBuffer(uint64(4*r.h.VocabSize), false)
			if err != nil {
				return fail(err)
			}
			sl.logits = buf
		}
		for _, b := range bufs {
			buf, err := r.c.NewBuffer(uint64(4*b.n), true)
			if err != nil {
				return fail(err)
			}
			*b.dst = buf
		}
		f, err := r.c.newFence()
		if err != nil {
			return fail(err)
		}
		sl.fence = f
	}
	for i := range ch.slots {
		s, err := r.c.NewSeq()
		if err != nil {
			return fail(err)
		}
		ch.slots[i].seq = s
		r.recordChainStep(s, ch, i)
		if err := s.End(); err != nil {
			return fail(err)
		}
	}
	*at = ch
	return ch, nil
}

// recordChainStep records the decode step on slot i's inputs: a barrier first (the step
// before it in the queue, the other slot's, may still be writing what this one reads), the
// step, then its argmax (a sampled chain: its draw) copied into the other slot's token id.
func (r *Resident) recordChainStep(s *Seq, ch *decodeChain, i int) {
	sl, other := &ch.slots[i], &ch.slots[i^1]
	saved := [5]*Buffer{r.ids, r.pos, r.ropeCS, r.best, r.logits}
	r.ids, r.pos, r.ropeCS, r.best = sl.ids, sl.pos, sl.ropeCS, sl.best
	if ch.sampled {
		r.logits, r.drawing = sl.logits, &sampleInputs{cfg: ch.cfg, u: sl.u}
	}
	defer func() {
		r.ids, r.pos, r.ropeCS, r.best, r.logits = saved[0], saved[1], saved[2], saved[3], saved[4]
		r.drawing = nil
	}()
	s.Barrier()
	r.recordStep(s)
	s.Barrier()
	s.Copy(sl.best, 0, other.ids, 0, 4)
}

// greedyChained is Greedy on the chain.
func (r *Resident) greedyChained(token, pos int) (int, error) {
	ch, err := r.chainReady()
	if err != nil {
		return 0, err
	}
	out, _, err := r.chainStep(ch, token, pos, 0, 0, true)
	if err != nil {
		return 0, err
	}
	return int(out[0]), nil
}

// chainStep runs the step at pos on ch: taken from the queue when it is the one queued ahead
// with this token (and, on a sampled chain, this uniform u), else submitted now; with ahead,
// the step at pos+1 (drawing with uNext) is queued behind it before the wait. It returns the
// step's result words (the argmax; a sampled chain's token and status) and its slot, and
// notes the token the device copied into the step queued ahead.
func (r *Resident) chainStep(ch *decodeChain, token, pos int, u, uNext float32, ahead bool) ([]uint32, *chainSlot, error) {
	cur := ch.ahead
	if cur >= 0 && ch.aheadPos == pos && ch.aheadTok == token && (!ch.sampled || ch.aheadU == u) {
		ch.ahead = -1
		ch.taken++
	} else {
		if err := r.settle(); err != nil {
			return nil, nil, err
		}
		cur = 0
		sl := &ch.slots[cur]
		if err := sl.ids.WriteU32(0, []uint32{uint32(token)}); err != nil {
			return nil, nil, err
		}
		if ch.sampled {
			if err := sl.u.WriteF32(0, []float32{u}); err != nil {
				return nil, nil, err
			}
		}
		if err := r.submitChainStep(sl, pos); err != nil {
			return nil, nil, err
		}
	}
	if ahead && pos+1 < r.ctxLen {
		// the other slot's last step was waited for before this one was submitted
		other := &ch.slots[cur^1]
		if ch.sampled {
			if err := other.u.WriteF32(0, []float32{uNext}); err != nil {
				r.settle()
				return nil, nil, err
			}
		}
		if err := r.submitChainStep(other, pos+1); err != nil {
			r.settle()
			return nil, nil, err
		}
		ch.ahead, ch.aheadPos, ch.aheadU = cur^1, pos+1, uNext
		ch.queued++
	}
	sl := &ch.slots[cur]
	sl.pending = false
	if err := r.c.waitFence(sl.fence); err != nil {
		r.settle()
		return nil, nil, fmt.Errorf("vulkan decode: %w", err)
	}
	out, err := sl.best.ReadU32(0, int(sl.best.Size/4))
	if err != nil {
		r.settle()
		return nil, nil, err
	}
	ch.aheadTok = int(out[0])
	return out, sl, nil
}

// submitChainStep writes pos into sl's inputs and queues its step.
func (r *Resident) submitChainStep(sl *chainSlot, pos int) error {
	if err := r.writePositions(sl.pos, sl.ropeCS, pos, 1); err != nil {
		return err
	}
	if err := sl.seq.Submit(sl.fence); err != nil {
		return fmt.Errorf("vulkan decode: %w", err)
	}
	sl.pending = true
	return nil
}

// settle waits for every chained step still queued or running and forgets the step queued
// ahead; every entry point that is not its taker calls it before touching the device.
func (r *Resident) settle() error {
	var errs []error
	for _, ch := range []*decodeChain{r.chain, r.sampled} {
		if ch == nil {
			continue
		}
		ch.ahead = -1
		for i := range ch.slots {
			if sl := &ch.slots[i]; sl.pending {
				sl.pending = false
				if err := r.c.waitFence(sl.fence); err != nil {
					errs = append(errs, fmt.Errorf("wait for a chained decode step: %w", err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// free releases the slots (after settle).
func (ch *decodeChain) free(c *Context) {
	for i := range ch.slots {
		sl := &ch.slots[i]
		if sl.seq != nil {
			sl.seq.Free()
		}
		for _, b := range []*Buffer{sl.ids, sl.pos, sl.ropeCS, sl.best, sl.u, sl.logits} {
			b.Free()
		}
		if sl.fence != vk.NullFence {
			vk.DestroyFence(c.dev, sl.fence, nil)
		}
	}
	ch.cfg.Free()
}
