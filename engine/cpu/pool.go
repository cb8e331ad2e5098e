package cpu

import "sync"

// pool runs data-parallel loops on a fixed set of worker goroutines, so a matvec over a few
// thousand rows does not pay for goroutine creation on every call.
type pool struct {
	threads int
	tasks   chan func()
	once    sync.Once
}

func newPool(threads int) *pool {
	if threads < 1 {
		threads = 1
	}
	p := &pool{threads: threads, tasks: make(chan func(), threads)}
	for i := 1; i < threads; i++ { // the caller is the remaining worker
		go func() {
			for task := range p.tasks {
				task()
			}
		}()
	}
	return p
}

// parallel calls fn over [0,n) split into contiguous ranges, at most one per thread and none
// smaller than minChunk items, and returns when every range is done. Small loops run inline.
func (p *pool) parallel(n, minChunk int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	chunks := p.threads
	if minChunk > 0 && n/minChunk < chunks {
		chunks = n / minChunk
	}
	if chunks <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	wg.Add(chunks - 1)
	for c := 1; c < chunks; c++ {
		lo, hi := c*n/chunks, (c+1)*n/chunks
		p.tasks <- func() {
			defer wg.Done()
			fn(lo, hi)
		}
	}
	fn(0, n/chunks)
	wg.Wait()
}

// close stops the workers. The pool must not be used afterwards.
func (p *pool) close() {
	p.once.Do(func() { close(p.tasks) })
}
