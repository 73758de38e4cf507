package tcpsync

import (
	"context"
	"sync"
)

// pieceQueue hands pieces to sources on demand.
type pieceQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	todo    []int // pieces to hand out, next first
	out     int   // pieces handed out, not done
	left    int   // pieces not done
	workers int   // sources still taking part
	err     error
}

func (q *pieceQueue) reset(n, workers int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.todo = make([]int, n)
	for k := range q.todo {
		q.todo[k] = n - 1 - k
	}
	q.left, q.workers = n, workers
}

func (q *pieceQueue) wake() {
	q.mu.Lock()
	if q.err == nil {
		q.err = context.Canceled
	}
	q.mu.Unlock()
	q.cond.Broadcast()
}

// take returns the next piece; when none is queued it waits while pieces
// are out (one may come back), unless nowait. false: nothing to do.
func (q *pieceQueue) take(nowait bool) (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.err == nil && len(q.todo) == 0 && q.left > 0 && !nowait {
		q.cond.Wait()
	}
	if q.err != nil || len(q.todo) == 0 {
		return 0, false
	}
	k := q.todo[len(q.todo)-1]
	q.todo = q.todo[:len(q.todo)-1]
	q.out++
	return k, true
}

func (q *pieceQueue) requeue(k int) {
	q.mu.Lock()
	q.todo = append(q.todo, k)
	q.out--
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *pieceQueue) done(int) {
	q.mu.Lock()
	q.out--
	q.left--
	q.mu.Unlock()
	q.cond.Broadcast()
}

// leave says a source stopped taking pieces.
func (q *pieceQueue) leave() {
	q.mu.Lock()
	q.workers--
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *pieceQueue) abort(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *pieceQueue) failed() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// wait returns once every piece is done (nil), or every source left with
// pieces not done (ErrNoSource), or the pull was aborted.
func (q *pieceQueue) wait() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.err == nil && q.left > 0 && q.workers > 0 {
		q.cond.Wait()
	}
	switch {
	case q.err != nil:
		return q.err
	case q.left > 0:
		return ErrNoSource
	}
	return nil
}
