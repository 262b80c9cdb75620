package torchengine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// Remote physical workers. A Python process on another machine is started
// by `easyscale worker --join` there (RunWorker), which relays the
// coordinator's control requests to it and its replies back over the
// worker's one authenticated connection (runtime/cluster's handshake, then
// these runtime/wire frames):
//
//	relayRequest  coordinator → worker   a control request (relay payload)
//	relayReply    worker → coordinator   its reply, the request's id echoed
//	relayBeat     either way, every second, empty
//	relayBye      coordinator → worker   released: close the Python process and exit 0
//	relayStandby  coordinator → worker   the standby's contexts (standby.go); not forwarded
//
// A relay payload is the control protocol's frame without its lengths'
// framing: 4 bytes big-endian length H, H bytes of the JSON header
// ({"type", "id", fields...}), then the request's or reply's payload.
// Requests are forwarded to the Python process in the order they arrive
// and answered as the process answers them, so several may be in flight
// (checkpoint overtakes a running step, as on a local process). Either end
// that hears nothing for its timeout gives the other up: the coordinator
// then treats the worker as lost (its step is redone), the worker closes its
// Python process.
const (
	relayRequest wire.Type = 64
	relayReply   wire.Type = 65
	relayBeat    wire.Type = 66
	relayBye     wire.Type = 67
	relayStandby wire.Type = 68
)

func init() {
	for t, n := range map[wire.Type]string{relayRequest: "torch-request", relayReply: "torch-reply", relayBeat: "torch-heartbeat", relayBye: "torch-bye", relayStandby: "torch-standby"} {
		wire.RegisterName(t, n)
	}
}

func encodeRelay(header map[string]any, payload []byte) ([]byte, error) {
	head, err := json.Marshal(header)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 4+len(head)+len(payload))
	b = binary.BigEndian.AppendUint32(b, uint32(len(head)))
	b = append(b, head...)
	return append(b, payload...), nil
}

func decodeRelay(b []byte) (frame, error) {
	if len(b) < 4 {
		return frame{}, fmt.Errorf("relay frame of %d bytes has no header length", len(b))
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return frame{}, fmt.Errorf("relay frame header of %d bytes runs past the %d-byte frame", n, len(b))
	}
	var f frame
	if err := json.Unmarshal(b[4:4+n], &f.header); err != nil {
		return frame{}, fmt.Errorf("relay frame header is not a JSON object: %w", err)
	}
	if _, ok := f.header["type"].(string); !ok {
		return frame{}, errors.New("relay frame header has no \"type\"")
	}
	if rest := b[4+n:]; len(rest) > 0 {
		f.payload = rest
	}
	return f, nil
}

// remote is a physical worker on another machine, as the coordinator sees
// it: a Member whose calls travel over the worker's connection.
type remote struct {
	c   *wire.Conn
	wmu sync.Mutex // serialises writes

	waiting pending[frame] // the calls waiting for their replies

	done     chan struct{} // closed when the reader stops (connection gone or silent)
	readErr  error
	lastBeat atomic.Int64 // unix nanoseconds of the last frame
	timeout  time.Duration

	node, addr string // hostname and HOST:PORT, for logs
	localAddr  string // the host its gloo listens on
	slurmNode  string // its Slurm node ("" off Slurm): standby.go
}

// newRemote starts reading c and heartbeating on it. A worker silent for
// timeout is given up (its calls fail with ErrHung, then ErrExited).
func newRemote(c *wire.Conn, timeout time.Duration, node, addr, localAddr string) *remote {
	r := &remote{c: c, done: make(chan struct{}), timeout: timeout, node: node, addr: addr, localAddr: localAddr}
	r.lastBeat.Store(time.Now().UnixNano())
	c.Timeout = timeout // a read with nothing, not even a heartbeat, for this long ends the reader
	go r.read()
	go r.beat()
	return r
}

func (r *remote) read() {
	defer close(r.done)
	for {
		h, err := r.c.ReadHeader()
		if err != nil {
			r.readErr = err
			return
		}
		b := make([]byte, h.Len)
		if err := r.c.ReadFull(b); err != nil {
			r.readErr = err
			return
		}
		r.lastBeat.Store(time.Now().UnixNano())
		switch h.Type {
		case relayBeat:
			continue
		case relayReply:
		default:
			r.readErr = fmt.Errorf("unexpected %v frame from the worker", h.Type)
			r.c.Close()
			return
		}
		f, err := decodeRelay(b)
		if err != nil {
			r.readErr = err
			r.c.Close()
			return
		}
		id, _ := f.header["id"].(float64)
		r.waiting.answer(int64(id), f) // a call that gave up has left: dropped
	}
}

func (r *remote) beat() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
			if r.write(relayBeat, nil) != nil {
				return
			}
		}
	}
}

func (r *remote) write(t wire.Type, b []byte) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return r.c.WriteFrame(t, b)
}

// Call implements Member, as Process.Call does for a local process.
func (r *remote) Call(ctx context.Context, typ string, fields map[string]any, payload []byte, out any) ([]byte, error) {
	id, reply, forget := r.waiting.add()
	defer forget()
	header := map[string]any{"type": typ, "id": id}
	for k, v := range fields {
		header[k] = v
	}
	b, err := encodeRelay(header, payload)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the request: %w", typ, err)
	}
	if err := r.write(relayRequest, b); err != nil {
		return nil, fmt.Errorf("%s: sending the request to %s: %w: %v", typ, r.addr, ErrExited, err)
	}
	watch := time.NewTicker(r.timeout / 4)
	defer watch.Stop()
	for {
		select {
		case f := <-reply:
			return decodeReply(typ, f, out)
		case <-r.done:
			return nil, fmt.Errorf("%s: worker %s: %w (%v)", typ, r.addr, ErrExited, r.readErr)
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", typ, ctx.Err())
		case now := <-watch.C:
			if silent := now.Sub(time.Unix(0, r.lastBeat.Load())); silent > r.timeout {
				return nil, fmt.Errorf("%s: worker %s: %w for %s", typ, r.addr, ErrHung, silent.Round(time.Millisecond))
			}
		}
	}
}

func (r *remote) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Close releases the worker (it closes its Python process and exits 0) and
// waits up to grace for it to hang up.
func (r *remote) Close(grace time.Duration) error {
	err := r.write(relayBye, nil)
	select {
	case <-r.done:
	case <-time.After(grace):
		err = errors.Join(err, fmt.Errorf("worker %s did not hang up within %s", r.addr, grace))
	}
	r.c.Close()
	return err
}

// Kill drops the connection at once; the worker closes its Python process.
func (r *remote) Kill() {
	r.c.Close()
	<-r.done
}

// nodeAddr is the host the worker's gloo listens on.
func (r *remote) nodeAddr() string { return r.localAddr }

// ifaceOf returns the name of the network interface holding ip (what
// GLOO_SOCKET_IFNAME wants), or "" when none does (e.g. 0.0.0.0).
func ifaceOf(host string) string {
	ip := net.ParseIP(host)
	if ip == nil || ip.IsUnspecified() {
		return ""
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, i := range ifs {
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return i.Name
			}
		}
	}
	return ""
}
