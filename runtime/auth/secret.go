package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SecretSize is the length of a job secret in bytes.
const SecretSize = 32

// Secret is a job's shared key (32 bytes from crypto/rand). It prints as a
// fingerprint, never as its bytes, so it cannot leak into logs by %v.
type Secret struct {
	key [SecretSize]byte
	set bool
}

// String returns "secret:" and the fingerprint.
func (s Secret) String() string { return "secret:" + s.Fingerprint() }

// GoString is String, so %#v does not print the key either.
func (s Secret) GoString() string { return s.String() }

// Fingerprint returns the first 8 bytes of SHA-256(key) in hex, a value that
// can be logged to compare two processes' secrets; "none" for the zero
// Secret.
func (s Secret) Fingerprint() string {
	if !s.set {
		return "none"
	}
	sum := sha256.Sum256(s.key[:])
	return hex.EncodeToString(sum[:8])
}

// IsZero reports whether s holds no key.
func (s Secret) IsZero() bool { return !s.set }

// ParseSecret reads a secret file's content: either exactly 32 raw bytes, or
// 64 hexadecimal digits optionally followed by a newline (the form a user
// can paste). Anything else is an error that says which forms are accepted.
func ParseSecret(data []byte) (Secret, error) {
	var s Secret
	switch {
	case len(data) == SecretSize:
		copy(s.key[:], data)
	case len(strings.TrimRight(string(data), "\r\n")) == 2*SecretSize && len(data) <= 2*SecretSize+2:
		if _, err := hex.Decode(s.key[:], []byte(strings.TrimRight(string(data), "\r\n"))); err != nil {
			return Secret{}, fmt.Errorf("auth: decoding a 64-digit hex secret: %w", err)
		}
	default:
		return Secret{}, fmt.Errorf("auth: secret of %d bytes: want %d raw bytes or %d hex digits", len(data), SecretSize, 2*SecretSize)
	}
	s.set = true
	return s, nil
}

// GenerateSecret returns a fresh secret from crypto/rand without storing it.
func GenerateSecret() (Secret, error) {
	var s Secret
	if _, err := io.ReadFull(rand.Reader, s.key[:]); err != nil {
		return Secret{}, fmt.Errorf("auth: reading random bytes for a job secret: %w", err)
	}
	s.set = true
	return s, nil
}

// PermissionError reports a secret file that group or others may access, or
// that belongs to another user.
type PermissionError struct {
	Path string
	Mode fs.FileMode
	// Owner is set when the file belongs to another user (its uid).
	Owner int
	// NotOwner reports that the file is not owned by this process's user.
	NotOwner bool
}

// Error names the file and the fix (chmod 600, or the owning user).
func (e *PermissionError) Error() string {
	if e.NotOwner {
		return fmt.Sprintf("auth: secret file %s belongs to uid %d, not to this user (uid %d); refusing to use it", e.Path, e.Owner, os.Getuid())
	}
	return fmt.Sprintf("auth: secret file %s has mode %04o and is accessible to group or others; refusing to use it (run: chmod 600 %s)", e.Path, e.Mode.Perm(), e.Path)
}

// NewSecret generates a secret and writes its 32 raw bytes to path with mode
// 0600. It refuses to replace an existing file (fs.ErrExist: a job's secret
// must not change under its running workers) and writes through a temporary
// file, so a crash never leaves a truncated secret at path.
func NewSecret(path string) (Secret, error) {
	s, err := GenerateSecret()
	if err != nil {
		return Secret{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-*")
	if err != nil {
		return Secret{}, fmt.Errorf("auth: creating job secret next to %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := writeSecretFile(tmp, s); err != nil {
		return Secret{}, fmt.Errorf("auth: writing job secret %s: %w", tmp.Name(), err)
	}
	// Link fails if path exists, unlike Rename: no secret is overwritten.
	if err := os.Link(tmp.Name(), path); err != nil {
		return Secret{}, fmt.Errorf("auth: creating job secret %s: %w", path, err)
	}
	return s, nil
}

func writeSecretFile(f *os.File, s Secret) error {
	err := f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(s.key[:])
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// LoadSecret reads a secret file written by NewSecret (or by a user, in the
// forms ParseSecret accepts). The file must be a regular file owned by this
// user with no group or other permissions, else a *PermissionError that
// names the file and the chmod to run.
func LoadSecret(path string) (Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return Secret{}, fmt.Errorf("auth: opening job secret: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Secret{}, fmt.Errorf("auth: checking job secret %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return Secret{}, fmt.Errorf("auth: job secret %s is not a regular file (mode %v)", path, fi.Mode())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return Secret{}, &PermissionError{Path: path, Mode: fi.Mode()}
	}
	if uid, ok := FileOwner(fi); ok && uid != os.Getuid() {
		return Secret{}, &PermissionError{Path: path, Mode: fi.Mode(), Owner: uid, NotOwner: true}
	}
	data, err := io.ReadAll(io.LimitReader(f, 2*SecretSize+3))
	if err != nil {
		return Secret{}, fmt.Errorf("auth: reading job secret %s: %w", path, err)
	}
	s, err := ParseSecret(data)
	if err != nil {
		return Secret{}, fmt.Errorf("auth: job secret %s: %w", path, err)
	}
	return s, nil
}
