package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// ProtocolVersion is the version of the EasyScale process protocol this
// build speaks; a peer of another version is refused with ErrWrongVersion.
const ProtocolVersion uint16 = 1

// NonceSize is the length in bytes of each side's challenge nonce.
const NonceSize = 32

// DefaultTimeout bounds a whole handshake when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// maxName bounds the job id and role strings (bytes).
const maxName = 256

// Reasons a handshake fails. An *Error wraps one of them; test with
// errors.Is.
var (
	// ErrWrongToken: the peer's proof does not verify; it does not hold
	// this job's secret.
	ErrWrongToken = errors.New("wrong token: the peer does not hold this job's secret")
	// ErrWrongJob: the peer belongs to another job.
	ErrWrongJob = errors.New("wrong job id")
	// ErrWrongVersion: the peer speaks another protocol version.
	ErrWrongVersion = errors.New("wrong protocol version")
	// ErrMalformed: the peer sent something that is not a valid handshake
	// message (not an EasyScale process, or a broken one).
	ErrMalformed = errors.New("malformed handshake message")
	// ErrTimeout: the peer did not complete the handshake in time.
	ErrTimeout = errors.New("handshake timed out")
)

// refusal codes on the wire, one per reason.
var reasonCodes = map[error]string{
	ErrWrongToken:   "wrong_token",
	ErrWrongJob:     "wrong_job",
	ErrWrongVersion: "wrong_version",
	ErrMalformed:    "malformed",
}

func reasonOf(code string) error {
	for r, c := range reasonCodes {
		if c == code {
			return r
		}
	}
	return ErrMalformed
}

// Error is a failed handshake: Reason is one of the Err* values, Err the
// underlying I/O or decoding error if any. Its message names the peer, who
// decided, and what differed, so it can be logged as is.
type Error struct {
	Reason error
	// Peer is the remote address.
	Peer string
	// ByPeer is true when the remote side refused this side; false when
	// this side refused the peer.
	ByPeer bool
	// Detail says what differed (e.g. both job ids).
	Detail string
	Err    error
}

// Error is a one-line, loggable description of the refusal.
func (e *Error) Error() string {
	who := "auth: refusing peer " + e.Peer
	if e.ByPeer {
		who = "auth: refused by peer " + e.Peer
	}
	msg := who + ": " + e.Reason.Error()
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the reason and the underlying error.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Err}
}

// Config is one side's view of the job.
type Config struct {
	// JobID names the job; peers of other jobs are refused.
	JobID string
	// Secret is the job's shared key (NewSecret, LoadSecret).
	Secret Secret
	// Version is the protocol version this side speaks; zero means
	// ProtocolVersion (tests set others to play an old build).
	Version uint16
	// Timeout bounds the whole handshake (default DefaultTimeout); a
	// shorter context deadline wins.
	Timeout time.Duration
}

func (c Config) version() uint16 {
	if c.Version == 0 {
		return ProtocolVersion
	}
	return c.Version
}

func (c Config) check() error {
	if c.Secret.IsZero() {
		return errors.New("auth: config has no secret")
	}
	if c.JobID == "" || len(c.JobID) > maxName {
		return fmt.Errorf("auth: job id of %d bytes, want 1-%d", len(c.JobID), maxName)
	}
	return nil
}

// Peer is what a successful handshake established about the other side.
type Peer struct {
	JobID   string
	Role    string
	Version uint16
	Addr    net.Addr
}

type challenge struct {
	Version uint16 `json:"version"`
	JobID   string `json:"job_id"`
	Nonce   []byte `json:"nonce"`
}

type response struct {
	Version uint16 `json:"version"`
	JobID   string `json:"job_id"`
	Role    string `json:"role"`
	Nonce   []byte `json:"nonce"`
	MAC     []byte `json:"mac"`
}

type result struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	MAC    []byte `json:"mac,omitempty"`
}

// proof computes HMAC-SHA256(secret, label || version || serverNonce ||
// len(job) job || clientNonce || len(role) role). The label differs per
// direction so that one side's proof is never valid as the other's, and the
// length prefixes make the encoding unambiguous.
func proof(s Secret, label string, version uint16, serverNonce []byte, job string, clientNonce []byte, role string) []byte {
	m := hmac.New(sha256.New, s.key[:])
	m.Write([]byte(label))
	m.Write(binary.LittleEndian.AppendUint16(nil, version))
	m.Write(serverNonce)
	m.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(job))))
	m.Write([]byte(job))
	m.Write(clientNonce)
	m.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(role))))
	m.Write([]byte(role))
	return m.Sum(nil)
}

const (
	clientLabel = "easyscale-auth client\x00"
	serverLabel = "easyscale-auth server\x00"
)

// session holds one handshake's connection and deadline.
type session struct {
	ctx  context.Context
	conn net.Conn
	wc   *wire.Conn
	stop func() bool
}

func begin(ctx context.Context, conn net.Conn, cfg Config) *session {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dl := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	return &session{ctx: ctx, conn: conn, wc: wire.NewConn(conn, 0, wire.MaxControl), stop: stop}
}

// end clears the deadline; it fails when the context ended meanwhile (the
// connection's deadline may then be in the past, so it must be dropped).
func (s *session) end() error {
	if !s.stop() {
		return fmt.Errorf("auth: handshake with %v: %w", s.conn.RemoteAddr(), s.ctx.Err())
	}
	s.conn.SetDeadline(time.Time{})
	return nil
}

// ioError classifies an I/O or decoding failure.
func (s *session) ioError(doing string, err error) error {
	if s.ctx.Err() != nil {
		return fmt.Errorf("auth: %s %v: %w", doing, s.conn.RemoteAddr(), s.ctx.Err())
	}
	reason := ErrMalformed
	if errors.Is(err, os.ErrDeadlineExceeded) {
		reason = ErrTimeout
	} else if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) {
		// a lost connection, not a refusal: a peer that died or closed
		// mid-handshake (a SIGKILLed coordinator's socket resets the
		// connections its kernel accepted); the caller may retry
		return fmt.Errorf("auth: %s %v: connection closed: %w", doing, s.conn.RemoteAddr(), err)
	}
	return &Error{Reason: reason, Peer: s.conn.RemoteAddr().String(), Detail: doing, Err: err}
}

func nonce() ([]byte, error) {
	n := make([]byte, NonceSize)
	if _, err := io.ReadFull(rand.Reader, n); err != nil {
		return nil, fmt.Errorf("auth: reading a random nonce: %w", err)
	}
	return n, nil
}

// Server runs the accepting side of the mutual challenge-response on conn:
//
//	server → client  challenge {version, job id, server nonce}
//	client → server  response  {version, job id, role, client nonce,
//	                            HMAC(secret, "client" label, ..., server nonce, job id, client nonce, role)}
//	server → client  result    {ok, HMAC(secret, "server" label, same fields)} or {refusal reason}
//
// The secret never travels; both proofs cover both fresh nonces, so neither
// can be replayed. It returns the authenticated peer, or an *Error whose
// Reason is ErrWrongVersion, ErrWrongJob, ErrWrongToken, ErrMalformed or
// ErrTimeout (the refusal is also sent to the client), or the context's
// error. The whole exchange is bounded by cfg.Timeout and ctx; on success
// the connection's deadlines are cleared.
func Server(ctx context.Context, conn net.Conn, cfg Config) (Peer, error) {
	if err := cfg.check(); err != nil {
		return Peer{}, err
	}
	s := begin(ctx, conn, cfg)
	p, err := s.server(cfg)
	if endErr := s.end(); err == nil {
		err = endErr
	}
	if err != nil {
		return Peer{}, err
	}
	return p, nil
}

func (s *session) server(cfg Config) (Peer, error) {
	sn, err := nonce()
	if err != nil {
		return Peer{}, err
	}
	if err := s.wc.WriteJSON(wire.TypeAuthChallenge, challenge{Version: cfg.version(), JobID: cfg.JobID, Nonce: sn}); err != nil {
		return Peer{}, s.ioError("sending the challenge to", err)
	}
	var r response
	if err := s.wc.ReadJSON(wire.TypeAuthResponse, &r); err != nil {
		return Peer{}, s.ioError("reading the response of", err)
	}
	addr := s.conn.RemoteAddr().String()
	refuse := func(reason error, detail string) (Peer, error) {
		s.wc.WriteJSON(wire.TypeAuthResult, result{Reason: reasonCodes[reason], Detail: detail})
		return Peer{}, &Error{Reason: reason, Peer: addr, Detail: detail}
	}
	switch {
	case r.Version != cfg.version():
		return refuse(ErrWrongVersion, fmt.Sprintf("peer speaks version %d, this side %d", r.Version, cfg.version()))
	case len(r.Nonce) != NonceSize || len(r.JobID) > maxName || len(r.Role) > maxName:
		return refuse(ErrMalformed, fmt.Sprintf("nonce of %d bytes, job id of %d, role of %d", len(r.Nonce), len(r.JobID), len(r.Role)))
	case r.JobID != cfg.JobID:
		return refuse(ErrWrongJob, fmt.Sprintf("peer job %q, this job %q", r.JobID, cfg.JobID))
	}
	want := proof(cfg.Secret, clientLabel, r.Version, sn, r.JobID, r.Nonce, r.Role)
	if !hmac.Equal(r.MAC, want) {
		return refuse(ErrWrongToken, fmt.Sprintf("job %q, role %q, the refusing side's secret has fingerprint %s", r.JobID, r.Role, cfg.Secret.Fingerprint()))
	}
	mac := proof(cfg.Secret, serverLabel, r.Version, sn, r.JobID, r.Nonce, r.Role)
	if err := s.wc.WriteJSON(wire.TypeAuthResult, result{OK: true, MAC: mac}); err != nil {
		return Peer{}, s.ioError("sending the result to", err)
	}
	return Peer{JobID: r.JobID, Role: r.Role, Version: r.Version, Addr: s.conn.RemoteAddr()}, nil
}

// Client runs the connecting side of the handshake (see Server) on conn,
// presenting role (at most 256 bytes, e.g. "worker" or "ring"), and checks
// the server's proof in turn. It returns the server as a Peer, or an *Error:
// with ByPeer set when the server refused this side (its reason code is
// mapped back to ErrWrongVersion, ErrWrongJob, ErrWrongToken or
// ErrMalformed), and with ByPeer unset when this side refuses the server
// (ErrWrongToken when the server cannot prove it holds the secret).
func Client(ctx context.Context, conn net.Conn, cfg Config, role string) (Peer, error) {
	if err := cfg.check(); err != nil {
		return Peer{}, err
	}
	if len(role) > maxName {
		return Peer{}, fmt.Errorf("auth: role of %d bytes, at most %d", len(role), maxName)
	}
	s := begin(ctx, conn, cfg)
	p, err := s.client(cfg, role)
	if endErr := s.end(); err == nil {
		err = endErr
	}
	if err != nil {
		return Peer{}, err
	}
	return p, nil
}

func (s *session) client(cfg Config, role string) (Peer, error) {
	var ch challenge
	if err := s.wc.ReadJSON(wire.TypeAuthChallenge, &ch); err != nil {
		return Peer{}, s.ioError("reading the challenge of", err)
	}
	addr := s.conn.RemoteAddr().String()
	if len(ch.Nonce) != NonceSize {
		return Peer{}, &Error{Reason: ErrMalformed, Peer: addr, Detail: fmt.Sprintf("challenge nonce of %d bytes", len(ch.Nonce))}
	}
	cn, err := nonce()
	if err != nil {
		return Peer{}, err
	}
	v := cfg.version()
	mac := proof(cfg.Secret, clientLabel, v, ch.Nonce, cfg.JobID, cn, role)
	if err := s.wc.WriteJSON(wire.TypeAuthResponse, response{Version: v, JobID: cfg.JobID, Role: role, Nonce: cn, MAC: mac}); err != nil {
		return Peer{}, s.ioError("sending the response to", err)
	}
	var res result
	if err := s.wc.ReadJSON(wire.TypeAuthResult, &res); err != nil {
		return Peer{}, s.ioError("reading the result of", err)
	}
	if !res.OK {
		return Peer{}, &Error{Reason: reasonOf(res.Reason), Peer: addr, ByPeer: true, Detail: res.Detail}
	}
	switch {
	case ch.Version != v:
		return Peer{}, &Error{Reason: ErrWrongVersion, Peer: addr, Detail: fmt.Sprintf("server speaks version %d, this side %d", ch.Version, v)}
	case ch.JobID != cfg.JobID:
		return Peer{}, &Error{Reason: ErrWrongJob, Peer: addr, Detail: fmt.Sprintf("server job %q, this job %q", ch.JobID, cfg.JobID)}
	}
	if !hmac.Equal(res.MAC, proof(cfg.Secret, serverLabel, v, ch.Nonce, cfg.JobID, cn, role)) {
		return Peer{}, &Error{Reason: ErrWrongToken, Peer: addr, Detail: "the server could not prove it holds this job's secret"}
	}
	return Peer{JobID: ch.JobID, Role: "server", Version: ch.Version, Addr: s.conn.RemoteAddr()}, nil
}
