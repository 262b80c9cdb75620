package auth

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewSecretWritesAPrivateFileThatLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.secret")
	s, err := NewSecret(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != SecretSize {
		t.Fatalf("secret file mode %v size %d, want 0600 and %d bytes", fi.Mode(), fi.Size(), SecretSize)
	}
	got, err := LoadSecret(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != s {
		t.Fatal("loaded secret differs from the generated one")
	}
	other, err := NewSecret(filepath.Join(t.TempDir(), "other.secret"))
	if err != nil {
		t.Fatal(err)
	}
	if other == s {
		t.Fatal("two generated secrets are equal")
	}
	if _, err := NewSecret(path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("NewSecret over an existing file: err = %v, want fs.ErrExist", err)
	}
	if again, _ := LoadSecret(path); again != s {
		t.Fatal("a refused NewSecret changed the existing secret")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("state directory holds %d entries after NewSecret, want only the secret", len(entries))
	}
}

func TestLoadSecret(t *testing.T) {
	hexKey := strings.Repeat("ab", SecretSize)
	cases := []struct {
		name    string
		content string
		mode    fs.FileMode
		wantErr string
	}{
		{name: "raw bytes with mode 0600 load", content: strings.Repeat("k", SecretSize), mode: 0o600},
		{name: "hex digits with a newline load", content: hexKey + "\n", mode: 0o600},
		{name: "a read-only 0400 file loads", content: hexKey, mode: 0o400},
		{name: "a group-readable file is refused with the chmod to run", content: hexKey, mode: 0o640, wantErr: "chmod 600"},
		{name: "a world-readable file is refused", content: hexKey, mode: 0o604, wantErr: "accessible to group or others"},
		{name: "a short file is refused", content: "short", mode: 0o600, wantErr: "want 32 raw bytes or 64 hex digits"},
		{name: "non-hex digits are refused", content: strings.Repeat("zz", SecretSize), mode: 0o600, wantErr: "hex"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s")
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.mode); err != nil {
				t.Fatal(err)
			}
			s, err := LoadSecret(path)
			if c.wantErr == "" {
				if err != nil || s.IsZero() {
					t.Fatalf("LoadSecret: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v does not name the file", err)
			}
		})
	}
	if _, err := LoadSecret(t.TempDir()); err == nil {
		t.Fatal("LoadSecret of a directory succeeded")
	}
}

func TestSecretNeverPrintsItsKey(t *testing.T) {
	s, err := ParseSecret([]byte(strings.Repeat("41", SecretSize)))
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s)} {
		if strings.Contains(out, "AAAA") || strings.Contains(out, "4141") {
			t.Fatalf("formatted secret %q shows the key", out)
		}
	}
	if s.Fingerprint() == (Secret{}).Fingerprint() || len(s.Fingerprint()) != 16 {
		t.Fatalf("fingerprint %q", s.Fingerprint())
	}
}

// FuzzParseSecret: any content either parses to a set secret whose key is
// the raw bytes or the decoded hex, or is an error; never a panic.
func FuzzParseSecret(f *testing.F) {
	f.Add([]byte(strings.Repeat("x", SecretSize)))
	f.Add([]byte(strings.Repeat("0f", SecretSize) + "\r\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSecret(data)
		if err != nil {
			return
		}
		if s.IsZero() {
			t.Fatal("parsed secret is zero")
		}
		if len(data) == SecretSize {
			if string(s.key[:]) != string(data) {
				t.Fatal("raw key differs")
			}
			return
		}
		if hex.EncodeToString(s.key[:]) != strings.ToLower(strings.TrimRight(string(data), "\r\n")) {
			t.Fatalf("hex key %x from %q", s.key, data)
		}
	})
}
