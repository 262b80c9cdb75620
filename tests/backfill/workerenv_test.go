package backfill

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// extraWorkerEnvironments returns the environment of every process of an
// extra job of parent (SLURM_JOB_ID another job's) running `easyscale
// worker` with the token file of parent's rendezvous directory rdv, by
// PID, as /proc/PID/environ holds it: what the process was last exec'd
// with (the lab's nodes all run on this machine, and the test runs as
// root).
func extraWorkerEnvironments(rdv, parent string) map[int][]string {
	token := filepath.Join(rdv, "token")
	out := map[int][]string{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) < 2 || filepath.Base(args[0]) != "easyscale" || args[1] != "worker" || !slices.Contains(args, token) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue
		}
		env := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if slices.Contains(env, "SLURM_JOB_ID="+parent) {
			continue // a task of the job itself
		}
		out[pid] = env
	}
	return out
}

// checkExtraWorkerEnvironments fails t when an extra worker of job parent
// (rendezvous directory rdv) that runs on its job's environment (it
// started itself again: EASYSCALE_JOB_ENVIRONMENT=1) lacks a variable of
// want or has one of notWant or the job's own SLURM_JOB_ID, and returns
// how many such workers it saw now.
func checkExtraWorkerEnvironments(t *testing.T, rdv, parent string, want, notWant []string) int {
	t.Helper()
	seen := 0
	for pid, env := range extraWorkerEnvironments(rdv, parent) {
		if !slices.Contains(env, "EASYSCALE_JOB_ENVIRONMENT=1") {
			continue // not yet started again on the job's environment
		}
		seen++
		bad := slices.Contains(env, "SLURM_JOB_ID="+parent)
		for _, w := range want {
			bad = bad || !slices.Contains(env, w)
		}
		for _, nw := range notWant {
			bad = bad || slices.Contains(env, nw)
		}
		if bad {
			t.Fatalf("extra worker %d of job %s runs on the daemon's environment or another job's ids, not its job's "+
				"(want %q, not %q):\n%s", pid, parent, want, notWant, strings.Join(env, "\n"))
		}
	}
	return seen
}
