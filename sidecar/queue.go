package sidecar

import (
	"context"
	"sync"
)

// fifo is a lock granted in arrival order: one generation (or model load) at a time, and a request
// that arrived first runs first. A waiter whose context ends leaves the line.
type fifo struct {
	mu      sync.Mutex
	busy    bool
	waiters []chan struct{}
}

// acquire waits for the lock or for ctx to end.
func (q *fifo) acquire(ctx context.Context) error {
	q.mu.Lock()
	if !q.busy {
		q.busy = true
		q.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	q.waiters = append(q.waiters, ch)
	q.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		for i, w := range q.waiters {
			if w == ch {
				q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
				q.mu.Unlock()
				return ctx.Err()
			}
		}
		q.mu.Unlock()
		// The lock was handed to us while ctx ended: pass it on.
		q.release()
		return ctx.Err()
	}
}

// release hands the lock to the oldest waiter, or frees it.
func (q *fifo) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) > 0 {
		ch := q.waiters[0]
		q.waiters = q.waiters[1:]
		close(ch)
		return
	}
	q.busy = false
}

// waiting is the number of requests in line behind the running one.
func (q *fifo) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters)
}
