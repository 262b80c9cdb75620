package auth

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

func mustSecret(t *testing.T) Secret {
	t.Helper()
	s, err := GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tcpPair returns the two ends of a real TCP connection on 127.0.0.1.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

type sideResult struct {
	peer Peer
	err  error
}

func TestHandshake(t *testing.T) {
	secret, otherSecret := mustSecret(t), mustSecret(t)
	job := Config{JobID: "job-42", Secret: secret, Timeout: 2 * time.Second}
	with := func(f func(*Config)) Config { c := job; f(&c); return c }
	cases := []struct {
		name          string
		server        Config
		client        Config
		wantReason    error // nil: both sides succeed
		wantInMessage string
	}{
		{name: "peers of one job with one secret authenticate each other", server: job, client: job},
		{name: "a client with another secret is refused as a wrong token", server: job,
			client: with(func(c *Config) { c.Secret = otherSecret }), wantReason: ErrWrongToken, wantInMessage: "wrong token"},
		{name: "a client of another job is refused as a wrong job", server: job,
			client: with(func(c *Config) { c.JobID = "job-7" }), wantReason: ErrWrongJob, wantInMessage: `peer job "job-7", this job "job-42"`},
		{name: "a client of another protocol version is refused as a wrong version", server: job,
			client: with(func(c *Config) { c.Version = ProtocolVersion + 1 }), wantReason: ErrWrongVersion, wantInMessage: "version 2, this side 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cc, sc := tcpPair(t)
			srv := make(chan sideResult, 1)
			go func() {
				p, err := Server(context.Background(), sc, c.server)
				srv <- sideResult{p, err}
			}()
			cp, cerr := Client(context.Background(), cc, c.client, "worker")
			s := <-srv
			if c.wantReason == nil {
				if s.err != nil || cerr != nil {
					t.Fatalf("server: %v; client: %v", s.err, cerr)
				}
				if s.peer.Role != "worker" || s.peer.JobID != "job-42" || cp.JobID != "job-42" {
					t.Fatalf("server saw %+v, client saw %+v", s.peer, cp)
				}
				return
			}
			var se, ce *Error
			if !errors.Is(s.err, c.wantReason) || !errors.As(s.err, &se) || se.ByPeer {
				t.Fatalf("server err = %v, want this side refusing with %v", s.err, c.wantReason)
			}
			if !errors.Is(cerr, c.wantReason) || !errors.As(cerr, &ce) || !ce.ByPeer {
				t.Fatalf("client err = %v, want refused by the peer with %v", cerr, c.wantReason)
			}
			if !strings.Contains(s.err.Error(), c.wantInMessage) || !strings.Contains(s.err.Error(), "127.0.0.1") {
				t.Fatalf("server message %q lacks %q or the peer address", s.err, c.wantInMessage)
			}
			if strings.Contains(s.err.Error()+cerr.Error(), string(secret.key[:])) {
				t.Fatal("an error message contains the secret")
			}
		})
	}
}

func TestServerRefusesGarbageAndStalls(t *testing.T) {
	job := Config{JobID: "j", Secret: mustSecret(t), Timeout: 300 * time.Millisecond}
	cases := []struct {
		name       string
		client     func(net.Conn)
		wantReason error
		wantAs     any
	}{
		{name: "a client that sends an HTTP request is malformed", wantReason: ErrMalformed, wantAs: new(*wire.MagicError),
			client: func(c net.Conn) { c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) }},
		{name: "a client that announces a huge message is malformed", wantReason: ErrMalformed, wantAs: new(*wire.SizeError),
			client: func(c net.Conn) { c.Write([]byte("ESW\x01\x02\xff\xff\xff\x7f")) }},
		{name: "a client that sends JSON of the wrong shape is malformed", wantReason: ErrMalformed,
			client: func(c net.Conn) { wire.WriteFrame(c, wire.TypeAuthResponse, []byte(`{"nonce":"not base64!"}`)) }},
		{name: "a client with a short nonce is malformed", wantReason: ErrMalformed,
			client: func(c net.Conn) {
				wire.WriteFrame(c, wire.TypeAuthResponse, []byte(`{"version":1,"job_id":"j","nonce":"AAAA","mac":"AAAA"}`))
			}},
		{name: "a client that never answers times out", wantReason: ErrTimeout, client: func(net.Conn) {}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cc, sc := tcpPair(t)
			c.client(cc)
			start := time.Now()
			_, err := Server(context.Background(), sc, job)
			if !errors.Is(err, c.wantReason) {
				t.Fatalf("err = %v, want %v", err, c.wantReason)
			}
			if c.wantAs != nil && !errors.As(err, c.wantAs) {
				t.Fatalf("err = %v, want it to wrap %T", err, c.wantAs)
			}
			if d := time.Since(start); d > job.Timeout+time.Second {
				t.Fatalf("server returned after %v, timeout %v", d, job.Timeout)
			}
		})
	}
}

func TestServerStopsWhenTheContextEnds(t *testing.T) {
	job := Config{JobID: "j", Secret: mustSecret(t), Timeout: time.Minute}
	_, sc := tcpPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := Server(ctx, sc, job)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestClientRefusesAnImpostorServer: a server that accepts any client but
// does not hold the secret cannot produce the server proof.
func TestClientRefusesAnImpostorServer(t *testing.T) {
	job := Config{JobID: "j", Secret: mustSecret(t), Timeout: 2 * time.Second}
	cc, sc := tcpPair(t)
	go func() {
		w := wire.NewConn(sc, time.Second, wire.MaxControl)
		w.WriteJSON(wire.TypeAuthChallenge, challenge{Version: ProtocolVersion, JobID: "j", Nonce: make([]byte, NonceSize)})
		var r response
		w.ReadJSON(wire.TypeAuthResponse, &r)
		w.WriteJSON(wire.TypeAuthResult, result{OK: true, MAC: r.MAC}) // replays the client's own proof
	}()
	_, err := Client(context.Background(), cc, job, "worker")
	var e *Error
	if !errors.Is(err, ErrWrongToken) || !errors.As(err, &e) || e.ByPeer {
		t.Fatalf("err = %v, want this side refusing the server's proof", err)
	}
}

func TestConfigWithoutSecretIsRefused(t *testing.T) {
	cc, _ := tcpPair(t)
	if _, err := Client(context.Background(), cc, Config{JobID: "j"}, "w"); err == nil {
		t.Fatal("a config without a secret was accepted")
	}
}

// A connection reset mid-handshake is a lost connection, not a refusal: a
// SIGKILLed coordinator's kernel accepted a rejoining worker's connect and
// reset it when the socket closed, and the worker, taking the reset for a
// malformed handshake (an *Error: retrying cannot help), exited instead of
// rejoining (lab, 2026-12-02 08:21).
func TestAResetMidHandshakeIsNoRefusal(t *testing.T) {
	job := Config{JobID: "j", Secret: mustSecret(t), Timeout: 2 * time.Second}
	cc, sc := tcpPair(t)
	sc.(*net.TCPConn).SetLinger(0) // close sends RST
	sc.Close()
	_, err := Client(context.Background(), cc, job, "worker")
	var e *Error
	if err == nil || errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want a plain connection error, not an *auth.Error", err, err)
	}
	if !strings.Contains(err.Error(), "connection closed") {
		t.Fatalf("err = %v, want it to say the connection closed", err)
	}
}
