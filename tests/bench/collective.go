package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/collective"
)

func init() { register("collective", collectiveFigures) }

const (
	// collectiveBytes is the gradient size of the all-reduce figures (25 MB,
	// ResNet-50's gradient in float32 is about 100 MB, LeNet's 0.25 MB).
	collectiveBytes = 25_000_000
	// collectiveRuns timed runs per figure (after collectiveWarmup); the
	// median is reported.
	collectiveRuns   = 9
	collectiveWarmup = 2
)

// collectiveFigures measures the ring all-reduce of runtime/collective on
// loopback, P ranks as goroutines of this process with real TCP sockets,
// one EST per rank, against a raw TCP copy of the same 25 MB:
//
//	allreduce_25mb_ms_p2     median all-reduce time, P = 2
//	tcp_copy_25mb_ms         median time to send 25 MB over one warm loopback connection
//	allreduce_vs_tcp_ratio   bus bandwidth (S/T·2(P-1)/P) over raw TCP bandwidth, P = 2; goal ≥ 0.8
//	allreduce_vs_tcp_ratio_p4  the same for P = 4 (its ceiling is (P-1)/P = 0.75, see the package doc)
func collectiveFigures() ([]figure, error) {
	tcp, err := tcpCopy(collectiveBytes)
	if err != nil {
		return nil, fmt.Errorf("raw TCP copy: %w", err)
	}
	figs := []figure{{Name: "tcp_copy_25mb_ms", Value: ms(tcp), Unit: "ms"}}
	for _, p := range []int{2, 4} {
		t, err := timeAllReduce(p, collectiveBytes)
		if err != nil {
			return nil, fmt.Errorf("all-reduce over %d ranks: %w", p, err)
		}
		busBW := float64(collectiveBytes) / t.Seconds() * 2 * float64(p-1) / float64(p)
		ratio := busBW / (float64(collectiveBytes) / tcp.Seconds())
		if p == 2 {
			figs = append(figs,
				figure{Name: "allreduce_25mb_ms_p2", Value: ms(t), Unit: "ms"},
				figure{Name: "allreduce_vs_tcp_ratio", Value: ratio, Unit: "ratio"})
			continue
		}
		figs = append(figs,
			figure{Name: fmt.Sprintf("allreduce_25mb_ms_p%d", p), Value: ms(t), Unit: "ms"},
			figure{Name: fmt.Sprintf("allreduce_vs_tcp_ratio_p%d", p), Value: ratio, Unit: "ratio"})
	}
	return figs, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// medianOf runs f collectiveWarmup times untimed and collectiveRuns times
// timed and returns the median of the timed runs.
func medianOf(f func() (time.Duration, error)) (time.Duration, error) {
	var ts []time.Duration
	for i := range collectiveWarmup + collectiveRuns {
		t, err := f()
		if err != nil {
			return 0, err
		}
		if i >= collectiveWarmup {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts[len(ts)/2], nil
}

// tcpCopy returns the median time of writing n bytes into one loopback TCP
// connection until the reader has all of them. The connection is reused
// across runs, as the ring's are, so both sides of the ratio run on warm
// sockets (grown buffers, no slow start).
func tcpCopy(n int) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	defer w.Close()
	r := <-accepted
	if r == nil {
		return 0, errors.New("accept failed")
	}
	defer r.Close()
	src, dst := make([]byte, n), make([]byte, n)
	return medianOf(func() (time.Duration, error) {
		start := time.Now()
		werr := make(chan error, 1)
		go func() {
			_, err := w.Write(src)
			werr <- err
		}()
		if _, err := io.ReadFull(r, dst); err != nil {
			return 0, err
		}
		d := time.Since(start)
		return d, <-werr
	})
}

// timeAllReduce builds an authenticated ring of p ranks on loopback and
// returns the median time of an all-reduce of n bytes (one EST per rank),
// from the start of the first rank's call to the end of the last one's.
func timeAllReduce(p, n int) (time.Duration, error) {
	secret, err := auth.GenerateSecret()
	if err != nil {
		return 0, err
	}
	opts := collective.Options{Auth: &auth.Config{JobID: "bench", Secret: secret}}
	members := make([]collective.Member, p)
	lns := make([]*net.TCPListener, p)
	for i := range lns {
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return 0, err
		}
		defer ln.Close()
		lns[i], members[i] = ln, collective.Member{Rank: i, Addr: ln.Addr().String()}
	}
	rings := make([]*collective.Ring, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i := range p {
		wg.Go(func() { rings[i], errs[i] = collective.Connect(context.Background(), i, members, lns[i], opts) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	defer func() {
		for _, r := range rings {
			r.Close()
		}
	}()
	m := n / 4
	grads, outs := make([][]float32, p), make([][]float32, p)
	for i := range grads {
		grads[i], outs[i] = make([]float32, m), make([]float32, m)
		for j := range grads[i] {
			grads[i][j] = float32(j%1000) * 0.001
		}
	}
	return medianOf(func() (time.Duration, error) {
		start := time.Now()
		for i := range p {
			wg.Go(func() {
				errs[i] = rings[i].AllReduce(context.Background(), outs[i], grads[i:i+1], i, float32(1)/float32(p))
			})
		}
		wg.Wait()
		return time.Since(start), errors.Join(errs...)
	})
}
