package data

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// goCommand runs the go command found on PATH with a timeout and returns its
// trimmed standard output. It never downloads (GOPROXY=off): a module
// missing from the module cache is an error.
func goCommand(args ...string) (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("finding the go command: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, args...)
	cmd.Env = append(os.Environ(), "GOPROXY=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("running go %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
