package cli

import (
	"net"
	"testing"
	"time"
)

// A coordinator answers only when its process sends its challenge: a
// listening socket whose process accepts nothing (a SIGKILLed
// coordinator's, while the kernel closes its files) completes the TCP
// connect but says nothing, and a standby that took that for a live
// coordinator rejoined a dead one (lab, 2026-12-02 08:21).
func TestACoordinatorAnswersOnlyWhenItsProcessSpeaks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(ln net.Listener) // nil: the socket listens, nothing accepts
		want  bool
	}{
		{"a live coordinator sends its challenge", func(ln net.Listener) {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte{1})
				defer c.Close()
			}
		}, true},
		{"a dying process's listener accepts in the kernel only", nil, false},
		{"a process that accepts and closes at once", func(ln net.Listener) {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if tc.serve != nil {
				go tc.serve(ln)
			}
			start := time.Now()
			if got := answers(ln.Addr().String(), 300*time.Millisecond); got != tc.want {
				t.Fatalf("answers = %v after %v, want %v", got, time.Since(start), tc.want)
			}
		})
	}
}
