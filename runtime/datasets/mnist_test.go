package datasets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/easyscale/easyscale-slurm/runtime/data"
)

// writeMNIST writes the four MNIST file names into dir (placeholder bytes:
// LocateMNIST only looks for the files), except the one named skip.
func writeMNIST(t *testing.T, dir, skip string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range data.MNISTFiles {
		if name == skip {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("placeholder"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// setInstallDir sets InstallDir for the test and restores it after.
func setInstallDir(t *testing.T, dir string) {
	old := InstallDir
	InstallDir = dir
	t.Cleanup(func() { InstallDir = old })
}

func TestLocateMNISTOrder(t *testing.T) {
	full := t.TempDir()
	writeMNIST(t, full, "")
	partial := t.TempDir()
	writeMNIST(t, partial, data.TestImagesFile)
	cwdWithData := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cwdWithData, "data", "mnist"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeMNIST(t, filepath.Join(cwdWithData, "data", "mnist"), "")
	emptyCwd := t.TempDir()
	emptyCache := t.TempDir()
	installed := t.TempDir()
	writeMNIST(t, filepath.Join(installed, "mnist"), "")
	emptyInstall := t.TempDir()
	cacheWithData := t.TempDir()
	writeMNIST(t, filepath.Join(cacheWithData, filepath.FromSlash(goMNISTCachePath), "data"), "")

	cases := []struct {
		name      string
		explicit  string
		env       string
		cwd       string
		install   string // InstallDir
		cache     string // $GOMODCACHE, when set
		want      string
		wantInErr []string
	}{
		{name: "an explicit directory wins over the environment", explicit: full, env: partial, cwd: emptyCwd, want: full},
		{name: "an explicit directory lacking a file is an error naming it", explicit: partial, cwd: emptyCwd, wantInErr: []string{data.TestImagesFile, "data.dir"}},
		{name: "the environment variable is used without an explicit directory", env: full, cwd: cwdWithData, want: full},
		{name: "an environment directory lacking a file is an error naming the variable", env: partial, cwd: cwdWithData, wantInErr: []string{MNISTDirEnv, data.TestImagesFile}},
		{name: "data/mnist under the working directory comes next", cwd: cwdWithData, want: filepath.Join("data", "mnist")},
		{name: "data/mnist wins over the installed copy", cwd: cwdWithData, install: installed, want: filepath.Join("data", "mnist")},
		{name: "the installed copy comes after data/mnist", cwd: emptyCwd, install: installed, cache: cacheWithData, want: filepath.Join(installed, "mnist")},
		{name: "the module cache comes after an installed directory lacking the files", cwd: emptyCwd, install: emptyInstall, cache: cacheWithData,
			want: filepath.Join(cacheWithData, filepath.FromSlash(goMNISTCachePath), "data")},
		{name: "nothing anywhere is one line naming the command to run", cwd: emptyCwd, cache: emptyCache,
			wantInErr: []string{"data.dir", MNISTDirEnv, "run `make data`", "go mod download " + GoMNISTModule, emptyCache}},
		{name: "nothing anywhere names the installed directory tried", cwd: emptyCwd, install: emptyInstall, cache: emptyCache,
			wantInErr: []string{filepath.Join(emptyInstall, "mnist"), emptyCache}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(MNISTDirEnv, tc.env)
			t.Chdir(tc.cwd)
			if tc.cache != "" {
				t.Setenv("GOMODCACHE", tc.cache)
			}
			setInstallDir(t, tc.install)
			got, err := LocateMNIST(tc.explicit)
			if tc.wantInErr != nil {
				if err == nil {
					t.Fatalf("LocateMNIST = %q, want an error", got)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q spans several lines", err)
				}
				for _, w := range tc.wantInErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("LocateMNIST = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestLocateMNISTFindsTheModuleCacheFromTheEnvironment(t *testing.T) {
	// fakeModule writes the four files where a module cache rooted at
	// cache holds GoMNIST and returns the data directory.
	fakeModule := func(t *testing.T, cache string) string {
		d := filepath.Join(cache, filepath.FromSlash(goMNISTCachePath), "data")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writeMNIST(t, d, "")
		return d
	}
	cases := []struct {
		name                     string
		gomodcache, gopath, home string // "cache" is replaced by the fake cache's root
		cacheUnder               string // where the fake cache lives, relative to the temp root
	}{
		{name: "GOMODCACHE names the cache", gomodcache: "cache", cacheUnder: "mc"},
		{name: "without GOMODCACHE the first GOPATH entry's pkg/mod", gopath: "cache", cacheUnder: "gp/pkg/mod"},
		{name: "without either ~/go/pkg/mod", home: "cache", cacheUnder: "home/go/pkg/mod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			want := fakeModule(t, filepath.Join(root, filepath.FromSlash(tc.cacheUnder)))
			pick := func(v, dir string) string {
				if v == "" {
					return ""
				}
				return filepath.Join(root, dir)
			}
			t.Setenv("GOMODCACHE", pick(tc.gomodcache, "mc"))
			gopath := pick(tc.gopath, "gp")
			if gopath != "" {
				gopath += string(filepath.ListSeparator) + filepath.Join(root, "second")
			}
			t.Setenv("GOPATH", gopath)
			t.Setenv("HOME", pick(tc.home, "home"))
			t.Setenv(MNISTDirEnv, "")
			t.Chdir(t.TempDir())
			got, err := LocateMNIST("")
			if err != nil || got != want {
				t.Fatalf("LocateMNIST = %q, %v; want %q", got, err, want)
			}
		})
	}
}

// fakeGo puts a `go` command first on PATH that records each call in a
// file, and returns that file's path.
func fakeGo(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(filepath.ListSeparator)+os.Getenv("PATH"))
	return calls
}

// TestLocatingDataNeverRunsTheGoCommand: compute nodes have no Go
// toolchain, so finding MNIST or the Opticks text must not run `go`.
func TestLocatingDataNeverRunsTheGoCommand(t *testing.T) {
	calls := fakeGo(t)
	t.Setenv(MNISTDirEnv, "")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Chdir(t.TempDir())
	if _, err := LocateMNIST(""); err == nil {
		t.Fatal("LocateMNIST found data in an empty module cache")
	}
	LocateOpticks()
	if b, err := os.ReadFile(calls); err == nil {
		t.Fatalf("locating data ran the go command: %q", b)
	}
}
