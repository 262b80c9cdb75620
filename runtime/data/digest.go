package data

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// FileDigest is the content identity of one file a task reads.
type FileDigest struct {
	// Name is the file's base name (e.g. "train-images-idx3-ubyte.gz"):
	// the key compared between machines and runs, whose copies live in
	// different directories.
	Name string `json:"name"`
	// Path is where this process read the file; informational only (it
	// names the file in errors), never compared.
	Path string `json:"path,omitempty"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the lower-case hex SHA-256 of the file's bytes.
	SHA256 string `json:"sha256"`
}

// Manifest lists the digests of every file a task reads, in the task's
// fixed load order (MNIST: MNISTFiles; charlm: the one text file).
type Manifest []FileDigest

// Digest returns "sha256:<hex>" over the lines "<name> <size> <sha256>\n"
// of m in order: one value for the whole data set, independent of where
// its files lie.
func (m Manifest) Digest() string {
	h := sha256.New()
	for _, f := range m {
		fmt.Fprintf(h, "%s %d %s\n", f.Name, f.Size, f.SHA256)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// DataMismatchError reports that two manifests of one job differ. File is
// the name of the first file (in load order) that differs, is missing
// from one side, or is extra on the other; Want and Got are its digests
// (a zero FileDigest for the side that lacks it).
type DataMismatchError struct {
	File      string
	Want, Got FileDigest
}

func (e *DataMismatchError) Error() string {
	side := func(f FileDigest) string {
		if f.Name == "" {
			return "no such file"
		}
		s := fmt.Sprintf("%d bytes, sha256 %s", f.Size, f.SHA256)
		if f.Path != "" {
			s = f.Path + ": " + s
		}
		return s
	}
	return fmt.Sprintf("training data file %s differs: %s, but the job's is %s", e.File, side(e.Got), side(e.Want))
}

// Compare returns nil when got holds the same files as m (names, sizes and
// SHA-256 in the same order; paths are ignored), else a *DataMismatchError
// naming the first file that differs.
func (m Manifest) Compare(got Manifest) error {
	for i := 0; i < max(len(m), len(got)); i++ {
		var w, g FileDigest
		if i < len(m) {
			w = m[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w.Name == g.Name && w.Size == g.Size && w.SHA256 == g.SHA256 {
			continue
		}
		name := w.Name
		if name == "" {
			name = g.Name
		}
		return &DataMismatchError{File: name, Want: w, Got: g}
	}
	return nil
}

// digestCacheFile is the name of the digest cache HashFiles keeps next to
// the data (a hidden JSON file in the data directory).
const digestCacheFile = ".easyscale-sha256.json"

// hashedBytes counts the bytes HashFiles has read to hash (tests and
// benchmarks read it through HashedBytes).
var hashedBytes atomic.Int64

// HashedBytes returns how many file bytes HashFiles has hashed in this
// process: it does not grow on a cache hit.
func HashedBytes() int64 { return hashedBytes.Load() }

// digestCache maps an absolute file path to the digest of the file as it
// was when hashed, with the stat fields that must still match.
type digestCache struct {
	Version int                    `json:"version"`
	Files   map[string]cachedEntry `json:"files"`
}

// cachedEntry is valid while the file's size, modification time, change
// time and inode are unchanged (the change time cannot be set back by a
// user, so a rewrite that restores the mtime is still noticed).
type cachedEntry struct {
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
	Inode   uint64 `json:"inode"`
	SHA256  string `json:"sha256"`
}

func statKey(fi os.FileInfo) cachedEntry {
	e := cachedEntry{Size: fi.Size(), MtimeNS: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.CtimeNS = st.Ctim.Sec*1e9 + st.Ctim.Nsec
		e.Inode = st.Ino
	}
	return e
}

// HashFiles returns the manifest of paths, in order: each file's base
// name, path, size and SHA-256. A digest is reused, without reading the
// file, when a cache entry for its absolute path matches its size, mtime,
// ctime and inode; the cache is DIR/.easyscale-sha256.json next to the
// files, or, where that cannot be written (a read-only data directory)
// or must not be (inside the Go module cache, whose `go mod verify` an
// extra file would fail), $XDG_CACHE_HOME/easyscale/data-sha256/
// (~/.cache/...) under a name derived from DIR. Caching is best effort: a
// cache that cannot be read or written only costs a rehash. Errors name
// the file that could not be read.
func HashFiles(paths ...string) (Manifest, error) {
	m := make(Manifest, 0, len(paths))
	caches := map[string]*cacheFile{}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("hashing data file %s: %w", p, err)
		}
		dir := filepath.Dir(abs)
		c := caches[dir]
		if c == nil {
			c = openCache(dir)
			caches[dir] = c
		}
		d, err := c.digest(abs)
		if err != nil {
			return nil, err
		}
		d.Path = p
		m = append(m, d)
	}
	for _, c := range caches {
		c.save()
	}
	return m, nil
}

// cacheFile is the digest cache of one data directory while HashFiles
// runs.
type cacheFile struct {
	dir   string
	c     digestCache
	dirty bool
}

// userCachePath is the fallback cache file of dir in the per-user cache.
func userCachePath(dir string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(base, "easyscale", "data-sha256", hex.EncodeToString(sum[:8])+".json")
}

func openCache(dir string) *cacheFile {
	c := &cacheFile{dir: dir, c: digestCache{Version: 1, Files: map[string]cachedEntry{}}}
	for _, p := range []string{filepath.Join(dir, digestCacheFile), userCachePath(dir)} {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var dc digestCache
		if json.Unmarshal(b, &dc) != nil || dc.Version != 1 {
			continue
		}
		for k, v := range dc.Files {
			if _, ok := c.c.Files[k]; !ok {
				c.c.Files[k] = v
			}
		}
	}
	return c
}

// digest returns the digest of the file at abs, from the cache when its
// stat fields match, else by reading it (and recording the result).
func (c *cacheFile) digest(abs string) (FileDigest, error) {
	f, err := os.Open(abs)
	if err != nil {
		return FileDigest{}, fmt.Errorf("hashing data file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return FileDigest{}, fmt.Errorf("hashing data file %s: %w", abs, err)
	}
	key := statKey(fi)
	if e, ok := c.c.Files[abs]; ok && e.SHA256 != "" {
		hit := e
		hit.SHA256 = ""
		if hit == key {
			return FileDigest{Name: filepath.Base(abs), Size: e.Size, SHA256: e.SHA256}, nil
		}
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	hashedBytes.Add(n)
	if err != nil {
		return FileDigest{}, fmt.Errorf("hashing data file %s: %w", abs, err)
	}
	// Stat again: a file changed while it was read must not be cached
	// under the stat fields of either version.
	if fi2, err := f.Stat(); err == nil && statKey(fi2) == key && n == key.Size {
		key.SHA256 = hex.EncodeToString(h.Sum(nil))
		c.c.Files[abs] = key
		c.dirty = true
		return FileDigest{Name: filepath.Base(abs), Size: n, SHA256: key.SHA256}, nil
	}
	return FileDigest{Name: filepath.Base(abs), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// save writes the cache next to the data, else to the per-user cache.
func (c *cacheFile) save() {
	if !c.dirty {
		return
	}
	b, err := json.MarshalIndent(c.c, "", " ")
	if err != nil {
		return
	}
	if !inModuleCache(c.dir) && writeAtomic(filepath.Join(c.dir, digestCacheFile), b) == nil {
		return
	}
	if p := userCachePath(c.dir); p != "" {
		if os.MkdirAll(filepath.Dir(p), 0o700) == nil {
			_ = writeAtomic(p, b)
		}
	}
}

// inModuleCache reports whether dir lies inside a Go module cache (a path
// element "<module>@v<version>"), where an extra file would make `go mod
// verify` fail: its cache goes to the per-user cache instead.
func inModuleCache(dir string) bool {
	for _, e := range strings.Split(filepath.ToSlash(dir), "/") {
		if strings.Contains(e, "@v") {
			return true
		}
	}
	return false
}

// writeAtomic writes b to path through a unique temporary file in the same
// directory and a rename, so concurrent writers never leave a torn file.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// MNISTPaths returns the paths of the four MNIST files in dir, in load
// order (MNISTFiles): what HashFiles hashes for the MNIST task.
func MNISTPaths(dir string) []string {
	out := make([]string, len(MNISTFiles))
	for i, name := range MNISTFiles {
		out[i] = filepath.Join(dir, name)
	}
	return out
}

// String returns the manifest as "name=sha256[:12]" pairs, for logs.
func (m Manifest) String() string {
	parts := make([]string, len(m))
	for i, f := range m {
		parts[i] = f.Name + "=" + f.SHA256[:min(12, len(f.SHA256))]
	}
	return strings.Join(parts, " ")
}
