package slurmcli

import (
	"context"
	"fmt"
	"strings"
)

// ParseSeries reads the release series ("22.05", "24.11") from what
// `scontrol --version` prints: "slurm 24.11.5", or Debian's
// "slurm-wlm 22.05.8". Other text is an error quoting it.
func ParseSeries(out []byte) (string, error) {
	f := strings.Fields(string(out))
	if len(f) != 2 || !strings.HasPrefix(f[0], "slurm") {
		return "", fmt.Errorf("scontrol --version printed %q, want \"slurm X.Y.Z\"", out)
	}
	parts := strings.SplitN(f[1], ".", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", fmt.Errorf("scontrol --version printed %q: no release series X.Y in %q", out, f[1])
	}
	return parts[0] + "." + parts[1], nil
}

// Series returns the release series of the Slurm clients
// (`scontrol --version`, which needs no slurmctld; [ParseSeries]). Errors
// say what was being done.
func (r Runner) Series(ctx context.Context) (string, error) {
	out, err := r.Output(ctx, "scontrol", "--version")
	if err != nil {
		return "", fmt.Errorf("reading the Slurm version (scontrol --version): %w", err)
	}
	return ParseSeries(out)
}
