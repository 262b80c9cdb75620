package torchengine

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
)

//go:embed python/easyscale/*.py
var pythonFS embed.FS

// PackageDigest returns the sha256 (hex) over the embedded package's file names
// and contents: the version that Extract writes and workers report.
func PackageDigest() string {
	h := sha256.New()
	for _, name := range packageFiles() {
		b, _ := pythonFS.ReadFile(name) // embedded: cannot fail for a listed name
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func packageFiles() []string {
	var names []string
	_ = fs.WalkDir(pythonFS, "python", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	return names
}

// Extract writes the embedded package under root/<digest prefix>/easyscale
// and returns the directory to put on PYTHONPATH (root/<digest prefix>). A
// directory already holding this version is reused; files are written to a
// temporary directory and renamed into place, so concurrent extractions by
// several workers on one node are safe. Errors name the directory.
func Extract(root string) (string, error) {
	dir := filepath.Join(root, PackageDigest()[:16])
	if ok, err := extracted(dir); err != nil || ok {
		return dir, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("extracting the easyscale Python package: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".extract-")
	if err != nil {
		return "", fmt.Errorf("extracting the easyscale Python package: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, name := range packageFiles() {
		b, _ := pythonFS.ReadFile(name)
		dst := filepath.Join(tmp, filepath.FromSlash(name[len("python/"):]))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", fmt.Errorf("extracting the easyscale Python package into %s: %w", tmp, err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", fmt.Errorf("extracting the easyscale Python package into %s: %w", tmp, err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("extracting the easyscale Python package: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if ok, _ := extracted(dir); ok { // another worker won the race
			return dir, nil
		}
		return "", fmt.Errorf("extracting the easyscale Python package to %s: %w", dir, err)
	}
	return dir, nil
}

// extracted reports whether dir holds exactly the embedded files.
func extracted(dir string) (bool, error) {
	for _, name := range packageFiles() {
		want, _ := pythonFS.ReadFile(name)
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name[len("python/"):])))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("checking the easyscale Python package in %s: %w", dir, err)
		}
		if string(got) != string(want) {
			return false, fmt.Errorf("%s differs from this binary's easyscale package %s: remove the directory",
				path.Join(dir, name[len("python/"):]), PackageDigest()[:16])
		}
	}
	return true, nil
}
