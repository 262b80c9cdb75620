package data

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeFiles writes name → content into dir and returns the paths in the
// order given.
func writeFiles(t *testing.T, dir string, files ...[2]string) []string {
	t.Helper()
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, f[0])
		if err := os.WriteFile(p, []byte(f[1]), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestHashFilesListsEveryFileInOrder(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	paths := writeFiles(t, dir, [2]string{"b.idx", "second"}, [2]string{"a.idx", "first!"})
	m, err := HashFiles(paths...)
	if err != nil {
		t.Fatal(err)
	}
	want := Manifest{{Name: "b.idx", Path: paths[0], Size: 6, SHA256: hexSHA("second")},
		{Name: "a.idx", Path: paths[1], Size: 6, SHA256: hexSHA("first!")}}
	if len(m) != 2 || m[0] != want[0] || m[1] != want[1] {
		t.Fatalf("HashFiles = %+v, want %+v", m, want)
	}
	if m.Digest() != want.Digest() || !strings.HasPrefix(m.Digest(), "sha256:") {
		t.Fatalf("Digest = %s, want %s", m.Digest(), want.Digest())
	}
	swapped := Manifest{want[1], want[0]}
	if swapped.Digest() == want.Digest() {
		t.Fatal("the digest does not depend on the order of the files")
	}
	if _, err := HashFiles(filepath.Join(dir, "missing.idx")); err == nil || !strings.Contains(err.Error(), "missing.idx") {
		t.Fatalf("hashing a missing file: %v, want an error naming it", err)
	}
}

func TestManifestCompareNamesTheFileThatDiffers(t *testing.T) {
	a := FileDigest{Name: "train-images-idx3-ubyte.gz", Size: 10, SHA256: hexSHA("a")}
	b := FileDigest{Name: "train-labels-idx1-ubyte.gz", Size: 3, SHA256: hexSHA("b")}
	changed := a
	changed.SHA256, changed.Path = hexSHA("A"), "/copy/train-images-idx3-ubyte.gz"
	elsewhere := b
	elsewhere.Path = "/elsewhere/train-labels-idx1-ubyte.gz"
	cases := []struct {
		name     string
		got      Manifest
		wantFile string // "" = equal
	}{
		{"the same files in other directories are equal", Manifest{a, elsewhere}, ""},
		{"one changed file is named with its path", Manifest{changed, b}, a.Name},
		{"a missing file is named", Manifest{a}, b.Name},
		{"an extra file is named", Manifest{a, b, {Name: "extra.txt", Size: 1, SHA256: hexSHA("x")}}, "extra.txt"},
		{"another order is a difference", Manifest{b, a}, a.Name},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Manifest{a, b}.Compare(tc.got)
			if tc.wantFile == "" {
				if err != nil {
					t.Fatalf("Compare = %v, want nil", err)
				}
				return
			}
			var me *DataMismatchError
			if !errors.As(err, &me) || me.File != tc.wantFile || !strings.Contains(err.Error(), tc.wantFile) {
				t.Fatalf("Compare = %v, want a mismatch naming %s", err, tc.wantFile)
			}
			if tc.got[0].Path != "" && me.File == tc.got[0].Name && !strings.Contains(err.Error(), tc.got[0].Path) {
				t.Errorf("error %q does not name the differing copy %s", err, tc.got[0].Path)
			}
		})
	}
}

// hashCost returns how many bytes one HashFiles(paths...) call read.
func hashCost(t *testing.T, paths ...string) (Manifest, int64) {
	t.Helper()
	before := HashedBytes()
	m, err := HashFiles(paths...)
	if err != nil {
		t.Fatal(err)
	}
	return m, HashedBytes() - before
}

func TestHashFilesCacheHitDoesNotRehash(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	paths := writeFiles(t, dir, [2]string{"x.idx", "0123456789"}, [2]string{"y.idx", "abc"})
	first, n1 := hashCost(t, paths...)
	if n1 != 13 {
		t.Fatalf("first hash read %d bytes, want 13", n1)
	}
	if _, err := os.Stat(filepath.Join(dir, digestCacheFile)); err != nil {
		t.Fatalf("no cache next to the data: %v", err)
	}
	second, n2 := hashCost(t, paths...)
	if n2 != 0 || second.Compare(first) != nil {
		t.Fatalf("second hash read %d bytes (want 0) and gave %v (want %v)", n2, second, first)
	}
	// The same size and the old mtime restored: the change time still
	// differs, so the file is rehashed and the change is seen.
	st, _ := os.Stat(paths[0])
	oldCtime := statKey(st).CtimeNS
	for deadline := time.Now().Add(2 * time.Second); statKey(mustStat(t, paths[0])).CtimeNS == oldCtime; {
		if time.Now().After(deadline) {
			t.Fatal("the change time never moved")
		}
		if err := os.WriteFile(paths[0], []byte("0123456780"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(paths[0], st.ModTime(), st.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	if now := mustStat(t, paths[0]); now.Size() != st.Size() || !now.ModTime().Equal(st.ModTime()) {
		t.Fatalf("size/mtime not restored: %d %v vs %d %v", now.Size(), now.ModTime(), st.Size(), st.ModTime())
	}
	third, n3 := hashCost(t, paths...)
	if n3 != 10 {
		t.Fatalf("after a rewrite the hash read %d bytes, want 10 (only the changed file)", n3)
	}
	var me *DataMismatchError
	if err := first.Compare(third); !errors.As(err, &me) || me.File != "x.idx" {
		t.Fatalf("Compare after the rewrite = %v, want x.idx named", err)
	}
}

func TestHashFilesCachesInTheUserCacheWhenTheDataDirectoryIsNotWritable(t *testing.T) {
	userCache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", userCache)
	cases := []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"the cache file cannot be created (a directory is in its way; root ignores modes)", func(t *testing.T) string {
			d := t.TempDir()
			if err := os.Mkdir(filepath.Join(d, digestCacheFile), 0o755); err != nil {
				t.Fatal(err)
			}
			return d
		}},
		{"a directory in the Go module cache is never written", func(t *testing.T) string {
			d := filepath.Join(t.TempDir(), "github.com", "petar", "!go!m!n!i!s!t@v0.0.0-1", "data")
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			return d
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			paths := writeFiles(t, dir, [2]string{"z.idx", "zzzz"})
			if _, n := hashCost(t, paths...); n != 4 {
				t.Fatalf("first hash read %d bytes, want 4", n)
			}
			if st, err := os.Stat(filepath.Join(dir, digestCacheFile)); err == nil && !st.IsDir() {
				t.Fatalf("a cache file was written into %s", dir)
			}
			if _, err := os.Stat(userCachePath(dir)); err != nil {
				t.Fatalf("no cache in the user cache directory: %v", err)
			}
			if _, n := hashCost(t, paths...); n != 0 {
				t.Fatalf("second hash read %d bytes, want 0", n)
			}
		})
	}
}

func TestHashFilesIgnoresACorruptCache(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	paths := writeFiles(t, dir, [2]string{"w.idx", "www"})
	if err := os.WriteFile(filepath.Join(dir, digestCacheFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, n := hashCost(t, paths...)
	if n != 3 || m[0].SHA256 != hexSHA("www") {
		t.Fatalf("with a corrupt cache: read %d bytes, digest %s; want 3 and %s", n, m[0].SHA256, hexSHA("www"))
	}
}

func mustStat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
