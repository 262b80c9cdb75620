package statedb

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnlyStatedbLinksSQLite: the SQLite driver is imported only by
// packages under statedb/ (a job's state, the backfill daemon's store), so
// every other package reaches a database through their APIs.
func TestOnlyStatedbLinksSQLite(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var importers []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "data") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), `"github.com/mattn/go-sqlite3"`) {
			rel, _ := filepath.Rel(root, path)
			importers = append(importers, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(importers) == 0 {
		t.Fatal("no file imports github.com/mattn/go-sqlite3: the walk did not reach statedb/")
	}
	for _, f := range importers {
		if !strings.HasPrefix(f, "statedb"+string(filepath.Separator)) {
			t.Errorf("%s imports github.com/mattn/go-sqlite3; only packages under statedb/ may", f)
		}
	}
}
