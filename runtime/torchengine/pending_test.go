package torchengine

import (
	"sync"
	"testing"
)

// TestPendingHandsEachReplyToItsOwnRequest: replies go to the request
// whose id they carry, in any order; a reply to a request that gave up
// (forgotten), a second reply and one for an id never issued are dropped.
func TestPendingHandsEachReplyToItsOwnRequest(t *testing.T) {
	var p pending[string]
	id1, r1, forget1 := p.add()
	id2, r2, forget2 := p.add()
	defer forget1()
	defer forget2()
	if id1 == id2 || id1 <= 0 || id2 <= 0 {
		t.Fatalf("ids %d and %d, want two distinct positive ids", id1, id2)
	}
	if !p.answer(id2, "second") || !p.answer(id1, "first") {
		t.Fatal("a waiting request was not answered")
	}
	if got1, got2 := <-r1, <-r2; got1 != "first" || got2 != "second" {
		t.Errorf("replies %q, %q; want first, second", got1, got2)
	}
	if p.answer(id1, "again") {
		t.Error("a second reply to an answered request was handed on")
	}
	id3, r3, forget3 := p.add()
	forget3()
	if p.answer(id3, "late") {
		t.Error("a reply to a request that gave up was handed on")
	}
	if p.answer(id3+1, "stray") {
		t.Error("a reply to an id never issued was handed on")
	}
	select {
	case v := <-r3:
		t.Errorf("a forgotten request received %q", v)
	default:
	}
}

// TestPendingUnderConcurrentRequests: many requests answered by another
// goroutine each get their own reply (`go test -race` finds unguarded
// access).
func TestPendingUnderConcurrentRequests(t *testing.T) {
	var p pending[int64]
	ids := make(chan int64)
	go func() {
		for id := range ids {
			p.answer(id, id*10)
		}
	}()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, reply, forget := p.add()
			defer forget()
			ids <- id
			if got := <-reply; got != id*10 {
				t.Errorf("request %d got reply %d", id, got)
			}
		}()
	}
	wg.Wait()
	close(ids)
}
