package cluster

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestClassifyReadsACoordinatorFrame(t *testing.T) {
	tests := []struct {
		name    string
		f       frame
		ok      bool
		want    frameKind
		wantErr string // part of the error, for frameLost
	}{
		{"the reader ended", frame{}, false, frameLost, "the connection is gone"},
		{"a read error", frame{err: io.ErrUnexpectedEOF}, true, frameLost, "reading from the coordinator: unexpected EOF"},
		{"a heartbeat", frame{t: typeHeartbeat}, true, frameHeartbeat, ""},
		{"an abort", frame{t: typeAbort}, true, frameAbort, ""},
		{"a bye", frame{t: typeBye}, true, frameBye, ""},
		{"the next step", frame{t: typeStep}, true, frameOther, ""},
		{"buffers", frame{t: typeBuffers}, true, frameOther, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := classify(tc.f, tc.ok)
			if got != tc.want {
				t.Fatalf("classify = %v, want %v", got, tc.want)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			}
			if tc.f.err != nil && !errors.Is(err, tc.f.err) {
				t.Errorf("error %v does not wrap the read error", err)
			}
		})
	}
}
