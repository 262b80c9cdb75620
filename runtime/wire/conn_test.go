package wire

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// loopbackPair returns both ends of a real TCP connection on 127.0.0.1.
func loopbackPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- nil
			return
		}
		done <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-done
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestConnFloat32FrameRoundTrip(t *testing.T) {
	a, b := loopbackPair(t)
	w, r := NewConn(a, time.Second, MaxTensor), NewConn(b, time.Second, MaxTensor)
	v := make([]float32, 3<<18+5) // larger than one ioStep
	for i := range v {
		v[i] = float32(i) * 0.25
	}
	prefix := []byte{1, 2, 3, 4}
	errc := make(chan error, 1)
	go func() { errc <- w.WriteFloat32Frame(TypeBroadcastChunk, prefix, v) }()
	h, err := r.ReadHeader()
	if err != nil {
		t.Fatal(err)
	}
	if h.Type != TypeBroadcastChunk || int(h.Len) != 4+4*len(v) {
		t.Fatalf("header %+v", h)
	}
	gotPrefix := make([]byte, 4)
	got := make([]float32, len(v))
	if err := r.ReadFull(gotPrefix); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadFloat32s(got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if string(gotPrefix) != string(prefix) {
		t.Fatalf("prefix %v", gotPrefix)
	}
	for i := range v {
		if got[i] != v[i] {
			t.Fatalf("element %d = %v, want %v", i, got[i], v[i])
		}
	}
}

func TestConnJSON(t *testing.T) {
	type msg struct {
		Rank int    `json:"rank"`
		Job  string `json:"job"`
	}
	cases := []struct {
		name    string
		send    func(*Conn) error
		wantErr any
	}{
		{name: "a message of the expected type decodes", send: func(c *Conn) error { return c.WriteJSON(TypeRingHello, msg{Rank: 3, Job: "j"}) }},
		{name: "a message of another type is a TypeError", send: func(c *Conn) error { return c.WriteJSON(TypeAuthResult, msg{}) }, wantErr: new(*TypeError)},
		{name: "a control message above MaxControl is a SizeError", send: func(c *Conn) error { return c.WriteFrame(TypeRingHello, make([]byte, MaxControl+1)) }, wantErr: new(*SizeError)},
		{name: "a payload that is not JSON is an error", send: func(c *Conn) error { return c.WriteFrame(TypeRingHello, []byte("{oops")) }, wantErr: new(error)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := loopbackPair(t)
			w, r := NewConn(a, time.Second, MaxTensor), NewConn(b, time.Second, MaxTensor)
			go c.send(w)
			var got msg
			err := r.ReadJSON(TypeRingHello, &got)
			switch want := c.wantErr.(type) {
			case nil:
				if err != nil || got != (msg{Rank: 3, Job: "j"}) {
					t.Fatalf("got %+v, %v", got, err)
				}
			case *error:
				if err == nil {
					t.Fatal("no error")
				}
			default:
				if !errors.As(err, want) {
					t.Fatalf("err = %v, want %T", err, want)
				}
			}
		})
	}
}

func TestConnStalledPeerTimesOut(t *testing.T) {
	a, b := loopbackPair(t)
	_ = a // the peer never writes
	r := NewConn(b, 100*time.Millisecond, MaxControl)
	start := time.Now()
	_, err := r.ReadHeader()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timed out after %v, want about 100ms", d)
	}
}

// SetTimeout(0) must lift the deadline an earlier read with a timeout left
// on the connection: a worker waits for the coordinator's next message
// without a deadline after a step that used one.
func TestSetTimeoutZeroClearsAnEarlierDeadline(t *testing.T) {
	client, server := loopbackPair(t)
	c := NewConn(client, 50*time.Millisecond, MaxControl)
	s := NewConn(server, 0, MaxControl)
	if err := s.WriteFrame(TypeRingHello, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadFrame(TypeRingHello); err != nil {
		t.Fatal(err)
	}
	c.SetTimeout(0)
	go func() {
		time.Sleep(200 * time.Millisecond) // past the old 50 ms deadline
		s.WriteFrame(TypeRingHello, []byte("b"))
	}()
	if _, err := c.ReadFrame(TypeRingHello); err != nil {
		t.Fatalf("read with Timeout 0 failed: %v (the earlier deadline was not cleared)", err)
	}
}

// TestWriteJSONThenFloatsIsTwoFrames reads what WriteJSONThenFloats wrote
// as the two ordinary frames it stands for, with a float body that fits in
// the first writev and one that does not.
func TestWriteJSONThenFloatsIsTwoFrames(t *testing.T) {
	for _, n := range []int{0, 37, 3<<18 + 5} {
		a, b := loopbackPair(t)
		w, r := NewConn(a, time.Second, MaxTensor), NewConn(b, time.Second, MaxTensor)
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i) - 0.5
		}
		errc := make(chan error, 1)
		go func() { errc <- w.WriteJSONThenFloats(TypeRingHello, map[string]int{"n": n}, TypeBroadcastChunk, v) }()
		var m map[string]int
		if err := r.ReadJSON(TypeRingHello, &m); err != nil || m["n"] != n {
			t.Fatalf("n=%d: JSON frame %v, %v", n, m, err)
		}
		h, err := r.ReadHeader()
		if err != nil || h.Type != TypeBroadcastChunk || int(h.Len) != 4*n {
			t.Fatalf("n=%d: float frame header %+v, %v", n, h, err)
		}
		got := make([]float32, n)
		if err := r.ReadFloat32s(got); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		for i := range v {
			if got[i] != v[i] {
				t.Fatalf("n=%d: element %d = %v, want %v", n, i, got[i], v[i])
			}
		}
	}
}
