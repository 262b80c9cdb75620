package cluster

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
)

// logBuffer collects a test's log lines from many goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// linesWith returns the lines of l that contain s.
func (l *logBuffer) linesWith(s string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// Anyone who can reach a coordinator can make it refuse connections: 900
// of them (closed at once, junk, a wrong token) leave a bounded number of
// log lines, and the coordinator's counter reads 900, as does the summary
// line it logs when it closes.
func TestRefusedConnectionsAreCountedAndLoggedAtABoundedRate(t *testing.T) {
	spec, wl := setup(t)
	type listener interface {
		Addr() string
		Refused() uint64
		Close() error
	}
	tests := []struct {
		name  string
		start func(log hclog.Logger) (listener, error)
	}{
		{"the coordinator of a native job", func(log hclog.Logger) (listener, error) {
			return NewCoordinator(CoordinatorOptions{Spec: spec, Data: wl.Data(), StateDir: t.TempDir(), Logger: log})
		}},
		{"the listener of an engine session", func(log hclog.Logger) (listener, error) {
			return NewListener(ListenerOptions{Spec: spec, Data: wl.Data(), StateDir: t.TempDir(), Logger: log})
		}},
	}
	wrong, err := auth.NewSecret(t.TempDir() + "/token")
	if err != nil {
		t.Fatal(err)
	}
	const connections = 900
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			l, err := tc.start(hclog.New(&hclog.LoggerOptions{Output: &logs}))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for i := range connections {
				nc, err := net.Dial("tcp", l.Addr())
				if err != nil {
					t.Fatal(err)
				}
				switch i % 3 {
				case 1:
					nc.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
				case 2:
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					auth.Client(ctx, nc, auth.Config{JobID: jobIDOf(spec), Secret: wrong}, "worker")
					cancel()
				}
				nc.Close()
			}
			for deadline := time.Now().Add(30 * time.Second); l.Refused() < connections; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d bad connections counted as refused after 30 s", l.Refused(), connections)
				}
			}
			l.Close()
			if got := l.Refused(); got != connections {
				t.Fatalf("Refused() = %d, want %d", got, connections)
			}
			lines := logs.linesWith("refused")
			if len(lines) > refusalBurst+2 {
				t.Fatalf("%d log lines about %d refused connections, want at most %d:\n%s", len(lines), connections, refusalBurst+2, strings.Join(lines, "\n"))
			}
			last := lines[len(lines)-1]
			if !strings.Contains(last, "not_logged=895") || !strings.Contains(last, "refused_total=900") {
				t.Fatalf("the last line does not sum up the refusals not logged:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// Each interval logs its first refusals one by one and, at its end, one
// line with the count of the others; the next refusal starts a new one.
func TestRefusalLogSumsUpEachInterval(t *testing.T) {
	var logs logBuffer
	r := newRefusalLog(hclog.New(&hclog.LoggerOptions{Output: &logs}))
	r.burst, r.interval = 2, 50*time.Millisecond
	for range 10 {
		r.refused("refused a joiner", "peer", "10.0.0.9:4000")
	}
	if n := len(logs.linesWith("refused a joiner")); n != 2 {
		t.Fatalf("%d refusals logged one by one in the first interval, want 2:\n%s", n, logs.String())
	}
	for deadline := time.Now().Add(10 * time.Second); len(logs.linesWith("not_logged=8 refused_total=10")) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no summary of the 8 refusals not logged 10 s after the interval:\n%s", logs.String())
		}
	}
	r.refused("refused a joiner", "peer", "10.0.0.9:4001")
	if len(logs.linesWith("refused_total=11")) != 1 {
		t.Fatalf("the first refusal of a new interval was not logged:\n%s", logs.String())
	}
	r.close()
	if n := len(logs.linesWith("not_logged")); n != 1 {
		t.Fatalf("%d summary lines, want 1 (nothing was left out after the first):\n%s", n, logs.String())
	}
	if r.Total() != 11 {
		t.Fatalf("Total() = %d, want 11", r.Total())
	}
}
