package tokenizer

// queue is a binary min-heap ordered by less, holding values without boxing them in interfaces
// (container/heap would allocate for every pushed pair).
type queue[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (q *queue[T]) len() int { return len(q.items) }

func (q *queue[T]) push(x T) {
	q.items = append(q.items, x)
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(q.items[i], q.items[p]) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
}

func (q *queue[T]) pop() T {
	top := q.items[0]
	n := len(q.items) - 1
	q.items[0] = q.items[n]
	q.items = q.items[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && q.less(q.items[l], q.items[m]) {
			m = l
		}
		if r < n && q.less(q.items[r], q.items[m]) {
			m = r
		}
		if m == i {
			break
		}
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
	return top
}
