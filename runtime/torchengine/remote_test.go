package torchengine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestRelayFramesRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name    string
		header  map[string]any
		payload []byte
	}{
		{"a request without payload", map[string]any{"type": "commit", "id": 3, "step": 7}, nil},
		{"a reply with a payload", map[string]any{"type": "step", "id": 9, "contexts": [][2]int{{0, 3}}}, []byte{1, 2, 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := encodeRelay(c.header, c.payload)
			if err != nil {
				t.Fatal(err)
			}
			f, err := decodeRelay(b)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(c.header)
			got, _ := json.Marshal(f.header)
			if !bytes.Equal(want, got) || !bytes.Equal(f.payload, c.payload) {
				t.Fatalf("decoded %s + %v, want %s + %v", got, f.payload, want, c.payload)
			}
		})
	}
}

func TestRelayFramesThatAreMalformedAreRefused(t *testing.T) {
	for _, c := range []struct {
		name, frame, want string
	}{
		{"too short for the header length", "\x00\x00", "no header length"},
		{"a header length past the frame", "\x00\x00\x00\x09{}", "runs past"},
		{"a header that is not JSON", "\x00\x00\x00\x02{x", "not a JSON object"},
		{"a header without type", "\x00\x00\x00\x02{}", "no \"type\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := decodeRelay([]byte(c.frame)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

func FuzzDecodeRelay(f *testing.F) {
	ok, _ := encodeRelay(map[string]any{"type": "step", "id": 1}, []byte("ctx"))
	f.Add(ok)
	f.Add([]byte("\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeRelay(b)
		if err != nil {
			return
		}
		again, err := encodeRelay(fr.header, fr.payload)
		if err != nil {
			t.Fatalf("re-encoding a decoded frame: %v", err)
		}
		if _, err := decodeRelay(again); err != nil {
			t.Fatalf("a re-encoded frame does not decode: %v", err)
		}
	})
}

func TestJoinersAreCheckedAgainstTheFirstProcess(t *testing.T) {
	ref := Loaded{Parameters: 10, TrainSamples: 50, Versions: Versions{Torch: "1.13.0a0", Python: "3.11"},
		Fingerprint: map[string]any{"torch": "1.13.0a0", "threads": 1, "env.ATEN_CPU_CAPABILITY": ""}, Canary: "sha256:a"}
	report := func(edit func(*joinReport)) json.RawMessage {
		j := joinReport{Package: PackageDigest(), Loaded: ref}
		j.Loaded.Fingerprint = map[string]any{"torch": "1.13.0a0", "threads": 1, "env.ATEN_CPU_CAPABILITY": ""}
		edit(&j)
		b, _ := json.Marshal(j)
		return b
	}
	for _, c := range []struct {
		name string
		raw  json.RawMessage
		want string // "" admits
	}{
		{"the same numerics are admitted", report(func(*joinReport) {}), ""},
		{"another ISA setting is refused naming it", report(func(j *joinReport) { j.Loaded.Fingerprint["env.ATEN_CPU_CAPABILITY"] = "default" }), `env.ATEN_CPU_CAPABILITY: want "", got default`},
		{"another canary is refused", report(func(j *joinReport) { j.Loaded.Canary = "sha256:b" }), "canary digest"},
		{"another torch version is refused naming both", report(func(j *joinReport) {
			j.Loaded.Torch, j.Loaded.Fingerprint["torch"], j.Loaded.Canary = "2.6.0", "2.6.0", "sha256:b"
		}), "torch 2.6.0 on the joining worker, the group runs torch 1.13.0a0: "},
		{"another Python is refused naming both", report(func(j *joinReport) { j.Loaded.Python = "3.13" }),
			"Python 3.13 on the joining worker, the group runs Python 3.11: "},
		{"another torch and Python are refused naming all four", report(func(j *joinReport) { j.Loaded.Versions = Versions{"2.6.0", "3.13"} }),
			"torch 2.6.0 and Python 3.13 on the joining worker, the group runs torch 1.13.0a0 and Python 3.11: "},
		{"a report without versions is refused", report(func(j *joinReport) { j.Loaded.Versions = Versions{} }),
			"torch (unknown) and Python (unknown) on the joining worker"},
		{"another torch version is refused before another model", report(func(j *joinReport) { j.Loaded.Torch, j.Loaded.Parameters = "2.6.0", 11 }),
			"torch 2.6.0 on the joining worker, the group runs torch 1.13.0a0"},
		{"another package version is refused", report(func(j *joinReport) { j.Package = "0123" }), "Python package"},
		{"another model is refused", report(func(j *joinReport) { j.Loaded.Parameters = 11 }), "11 parameters"},
		{"a join without a torch report is refused", json.RawMessage(`null`), "no torch report"},
		{"a join with an empty report is refused", nil, "no torch report"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkJoin(ref, c.raw)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
			var ve *VersionError
			if want := strings.Contains(c.want, "on the joining worker"); errors.As(err, &ve) != want {
				t.Fatalf("error %T %v: a *VersionError is %v, want %v", err, err, !want, want)
			}
		})
	}
}
