package cluster

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// A worker that never got in says why: the error it gives up with keeps
// the cause (here the refused connection) for errors.Is, not only its text.
func TestNeverJoinedKeepsItsCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: dialing is refused
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = RunWorker(ctx, WorkerOptions{Join: addr, JoinTimeout: time.Nanosecond})
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, errNeverJoined) {
		t.Fatalf("RunWorker against a closed port = %v, want ErrUnreachable and errNeverJoined", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("RunWorker against a closed port = %v: the refused dial is not its cause (errors.Is ECONNREFUSED)", err)
	}
}
