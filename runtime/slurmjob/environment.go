package slurmjob

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// EnvironmentFile is the rendezvous file holding the environment of a
// job's coordinator task (the job's own, as the user submitted it, plus
// its step's): NUL-separated KEY=VALUE entries, mode 0600 in the job's
// private rendezvous directory. An extra job of easyscale-backfilld is
// submitted by the daemon with its PATH and SLURM_CONF alone (never the
// rest of its environment: HOME=/root and whatever else a root daemon
// holds are not the user's); its `easyscale worker` starts again on the
// job's environment ([MergeEnvironment]), so the worker and the Python
// process it starts see what the job's own tasks see (HOME, the user's
// variables and data paths).
const EnvironmentFile = "environment"

// EnvironmentAppliedVar marks a worker that already runs on its job's
// environment (set by the worker when it starts itself again; never taken
// from the job's file).
const EnvironmentAppliedVar = "EASYSCALE_JOB_ENVIRONMENT"

// PublishEnvironment writes environ (os.Environ's form) into
// dir/environment atomically, mode 0600, once dir passes [CheckPrivateDir];
// entries without '=' or with a NUL byte are left out. Errors say what
// failed and wrap the cause.
func PublishEnvironment(dir string, environ []string) error {
	var b strings.Builder
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(kv, 0) {
			continue
		}
		b.WriteString(kv)
		b.WriteByte(0)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("publishing the job's environment: %w", err)
	}
	if err := CheckPrivateDir(dir); err != nil {
		return fmt.Errorf("publishing the job's environment: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, EnvironmentFile), b.String()); err != nil {
		return fmt.Errorf("publishing the job's environment: %w", err)
	}
	return nil
}

// JobEnvironment returns the entries of dir/environment: nil when there is
// no such file (a directory written by a version before the file, or no
// job's); an error when it cannot be read, or when another user owns it or
// may write it (readOwnFile).
func JobEnvironment(dir string) ([]string, error) {
	b, err := readOwnFile(filepath.Join(dir, EnvironmentFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the job's environment: %w", err)
	}
	var out []string
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
			out = append(out, kv)
		}
	}
	return out, nil
}

// ownedByProcess reports whether variable key describes the process that
// reads it rather than the job: its Slurm job, step, task and node
// (SLURM_*, SLURMD_*, the MPI launcher's PMI_*, PMIX_*, OMPI_*), the GPUs
// Slurm bound it to, the SPANK plugin's ELASTIC_* of the job it belongs
// to, the shell's own, the worker's own flags and its CPU binding
// (runtime/cluster's EASYSCALE_CPUS_BOUND). An extra job's worker keeps
// these from its own environment.
func ownedByProcess(key string) bool {
	for _, p := range []string{"SLURM_", "SLURMD_", "PMI_", "PMIX_", "OMPI_", "ELASTIC_"} {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return slices.Contains([]string{
		"CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
		"HOSTNAME", "ENVIRONMENT", "TMPDIR", "PWD", "OLDPWD", "SHLVL", "_",
		"EASYSCALE_JOIN", "EASYSCALE_TOKEN_FILE", "EASYSCALE_JOB_ID", "EASYSCALE_CPUS_BOUND", EnvironmentAppliedVar,
	}, key)
}

// MergeEnvironment returns the environment an extra job's worker runs on:
// job's entries (from [JobEnvironment]) for every variable but those that
// describe the process itself, which come from own (its environment as
// Slurm started it); a variable only own has is kept. The result is
// sorted by key, one entry per key (the last of each list wins).
func MergeEnvironment(own, job []string) []string {
	m := map[string]string{}
	for _, kv := range own {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = kv
		}
	}
	for _, kv := range job {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" && !ownedByProcess(k) {
			m[k] = kv
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}
