package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// spinChecks is how many times an idle thread polls for the next job (yielding to other
// goroutines in between) before it parks. A token's forward pass issues about ten parallel
// loops per layer with only microseconds of serial work between them, so a worker that spins
// briefly picks the next loop up without the cost of a wake-up; one that finds nothing for
// longer parks and costs nothing.
const spinChecks = 2000

// pool runs data-parallel loops on a fixed set of worker goroutines. The caller of parallel
// works too. Threads take chunks of the index range from a shared counter, so a thread the
// operating system preempts (the machine may be busy) delays the loop by one chunk, not by a
// fixed share of it.
type pool struct {
	threads int

	// the current loop, published by gen
	fn       func(w, lo, hi int)
	n, chunk int
	next     atomic.Int64 // start of the next unclaimed chunk
	pending  atomic.Int32 // workers that have not finished the current loop
	gen      atomic.Uint64

	sleeping   []atomic.Bool   // per worker: parked on wake[i]
	wake       []chan struct{} // per worker, capacity 1
	waiting    atomic.Bool     // the caller is parked on done
	done       chan struct{}   // capacity 1
	closed     atomic.Bool
	closeOnce  sync.Once
	workerDone sync.WaitGroup
}

func newPool(threads int) *pool {
	if threads < 1 {
		threads = 1
	}
	p := &pool{
		threads:  threads,
		sleeping: make([]atomic.Bool, threads),
		wake:     make([]chan struct{}, threads),
		done:     make(chan struct{}, 1),
	}
	for i := 1; i < threads; i++ { // the caller is worker 0
		p.wake[i] = make(chan struct{}, 1)
		p.workerDone.Add(1)
		go p.worker(i, p.gen.Load())
	}
	return p
}

// worker runs the loops published after generation seen, the generation current when the
// pool started it (the goroutine may start after the first loop is published).
func (p *pool) worker(id int, seen uint64) {
	defer p.workerDone.Done()
	for {
		g := p.gen.Load()
		for i := 0; g == seen && i < spinChecks; i++ {
			if i&15 == 15 {
				runtime.Gosched()
			}
			g = p.gen.Load()
		}
		if g == seen {
			p.sleeping[id].Store(true)
			// re-check after announcing the nap, so a loop published in between is not missed
			for g = p.gen.Load(); g == seen; g = p.gen.Load() {
				<-p.wake[id]
			}
			p.sleeping[id].Store(false)
		}
		if p.closed.Load() {
			return
		}
		seen = g
		p.run(id)
		if p.pending.Add(-1) == 0 && p.waiting.Load() {
			select {
			case p.done <- struct{}{}:
			default:
			}
		}
	}
}

// run claims chunks of the current loop until none is left.
func (p *pool) run(id int) {
	n, chunk, fn := p.n, p.chunk, p.fn
	for {
		lo := int(p.next.Add(int64(chunk))) - chunk
		if lo >= n {
			return
		}
		fn(id, lo, min(lo+chunk, n))
	}
}

// parallel calls fn over [0,n) split into contiguous ranges of at least minChunk items and
// returns when every range is done. w is the index (0..threads-1) of the thread running the
// range, for per-thread scratch space; no two ranges with the same w run at once. Small loops
// run inline. parallel must not be called concurrently or from inside fn.
func (p *pool) parallel(n, minChunk int, fn func(w, lo, hi int)) {
	if n <= 0 {
		return
	}
	minChunk = max(minChunk, 1)
	if p.threads == 1 || n < 2*minChunk {
		fn(0, 0, n)
		return
	}
	// a few chunks per thread balance a preempted thread without much claiming traffic
	chunk := max(minChunk, (n+4*p.threads-1)/(4*p.threads))
	p.fn, p.n, p.chunk = fn, n, chunk
	p.next.Store(0)
	p.pending.Store(int32(p.threads - 1))
	p.gen.Add(1)
	for i := 1; i < p.threads; i++ {
		if p.sleeping[i].Load() {
			select {
			case p.wake[i] <- struct{}{}:
			default:
			}
		}
	}
	p.run(0)
	for i := 0; p.pending.Load() != 0 && i < spinChecks; i++ {
		if i&15 == 15 {
			runtime.Gosched()
		}
	}
	if p.pending.Load() != 0 {
		p.waiting.Store(true)
		for p.pending.Load() != 0 {
			<-p.done
		}
		p.waiting.Store(false)
	}
	p.fn = nil
}

// close stops the workers. The pool must not be used afterwards.
func (p *pool) close() {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		p.gen.Add(1)
		for i := 1; i < p.threads; i++ {
			select {
			case p.wake[i] <- struct{}{}:
			default:
			}
		}
		p.workerDone.Wait()
	})
}
