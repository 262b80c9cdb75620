package datasets

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// OpticksRelPath is the location of Newton's Opticks (public domain, from
// Project Gutenberg) inside a Go installation.
const OpticksRelPath = "src/testdata/Isaac.Newton-Opticks.txt"

// OpticksLocalPath is where `make data` copies the Opticks text, relative
// to the working directory; `make install` copies it to the same path
// below InstallDir without the leading "data/".
const OpticksLocalPath = "data/charlm/Isaac.Newton-Opticks.txt"

// CharLMDirEnv is the environment variable naming a directory that holds
// the Opticks text (Isaac.Newton-Opticks.txt), MNISTDirEnv's twin: a node
// without the source tree, `make install` or Go (the current lab's Debian
// 13 root, where make test-current sets it) points at a copy with it.
const CharLMDirEnv = "EASYSCALE_CHARLM_DIR"

// LocateOpticks returns the path of the Opticks text: $EASYSCALE_CHARLM_DIR's
// copy when the variable is set (an error naming the file when it lacks
// it), else the first that exists of: ./data/charlm/Isaac.Newton-Opticks.txt (what `make data` writes),
// InstallDir/charlm/Isaac.Newton-Opticks.txt (when InstallDir is set),
// $GOROOT/src/testdata/..., and the same under the GOROOT this binary was
// built with. It only looks at the file system: it never runs the go
// command, which compute nodes do not have. The error lists the paths
// tried and how to provide the file.
func LocateOpticks() (string, error) {
	if env := os.Getenv(CharLMDirEnv); env != "" {
		p := filepath.Join(env, filepath.Base(OpticksLocalPath))
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return "", fmt.Errorf("%s=%s lacks %s: run `make data` in the easyscale source tree and point it at data/charlm", CharLMDirEnv, env, filepath.Base(p))
		}
		return p, nil
	}
	candidates := []string{filepath.FromSlash(OpticksLocalPath)}
	if InstallDir != "" {
		candidates = append(candidates, filepath.Join(InstallDir, "charlm", filepath.Base(OpticksLocalPath)))
	}
	if r := os.Getenv("GOROOT"); r != "" {
		candidates = append(candidates, filepath.Join(r, filepath.FromSlash(OpticksRelPath)))
	}
	//lint:ignore SA1019 the build-time GOROOT is only a last resort.
	if r := runtime.GOROOT(); r != "" {
		candidates = append(candidates, filepath.Join(r, filepath.FromSlash(OpticksRelPath)))
	}
	var tried []string
	for _, p := range candidates {
		if slices.Contains(tried, p) {
			continue
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("the Opticks text was not found (tried %s): run `make data` in the easyscale source tree (it copies $(go env GOROOT)/%s to %s), or set data.dir in the job file to a directory holding Isaac.Newton-Opticks.txt",
		strings.Join(tried, ", "), OpticksRelPath, OpticksLocalPath)
}
