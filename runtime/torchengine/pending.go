package torchengine

import "sync"

// pending is a registry of requests waiting for their replies, by request
// id, for a connection that carries several requests at once (a worker
// process's calls, a remote worker's calls, the fork server's spawn
// requests): each request gets a
// fresh id, and a reply is handed only to the request that still waits
// for its id, so a late reply to a request that gave up is dropped, never
// taken for another's. Safe for concurrent use; the zero value is ready.
type pending[T any] struct {
	mu      sync.Mutex
	next    int64
	waiting map[int64]chan T
}

// add registers a new request and returns its id (from 1, ascending), the
// channel its reply comes on (buffered: answer never blocks), and forget,
// which unregisters it; call forget when the request is done, answered or
// not.
func (p *pending[T]) add() (id int64, reply <-chan T, forget func()) {
	ch := make(chan T, 1)
	p.mu.Lock()
	if p.waiting == nil {
		p.waiting = map[int64]chan T{}
	}
	p.next++
	id = p.next
	p.waiting[id] = ch
	p.mu.Unlock()
	return id, ch, func() {
		p.mu.Lock()
		delete(p.waiting, id)
		p.mu.Unlock()
	}
}

// answer hands v to the request waiting for id and unregisters it; it
// reports whether one was waiting (false: unknown id, already answered, or
// forgotten).
func (p *pending[T]) answer(id int64, v T) bool {
	p.mu.Lock()
	ch, ok := p.waiting[id]
	delete(p.waiting, id)
	p.mu.Unlock()
	if ok {
		ch <- v
	}
	return ok
}
