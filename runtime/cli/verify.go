package cli

import (
	"fmt"
	"strings"

	"github.com/easyscale/easyscale-slurm/internal/cmdline"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/torchengine"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// verifyCmd compares two state directories' ledgers step by step: exit 0
// when every step hashed in both runs has the same digest, 1 naming the
// first divergent step and its differing tensors, 2 on bad usage, when
// there is nothing to compare, or when a ledger cannot be trusted (its
// rows that do not match their checksums, and the steps whose rows are
// missing, are named). A step one run recorded unhashed (the torch engine
// hashes every K steps when hashing costs more than 1 % of a step) is not
// compared; the OK line says how many steps were and how many were not.
func verifyCmd(args []string, env Env) int {
	fs := newFlagSet("verify", "verify DIR_A DIR_B", env)
	if code, ok := cmdline.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(env.Stderr, "easyscale verify: give two state directories: easyscale verify DIR_A DIR_B")
		return 2
	}
	if ja, jb, err := jobsOf(fs.Arg(0), fs.Arg(1)); err == nil && ja.ID != jb.ID {
		fmt.Fprintf(env.Stdout, "DIFFERENT JOBS: %s is %s (%s), %s is %s (%s); fields that differ: %s\n",
			fs.Arg(0), ja.Name, ja.ID, fs.Arg(1), jb.Name, jb.ID, strings.Join(jobspec.Diff(ja.Spec, jb.Spec), ", "))
		return 1
	}
	a, err := readLedger(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale verify: %v\n", err)
		return 2
	}
	b, err := readLedger(fs.Arg(1))
	if err != nil {
		fmt.Fprintf(env.Stderr, "easyscale verify: %v\n", err)
		return 2
	}
	byStep := make(map[int64]statedb.LedgerEntry, len(b))
	for _, e := range b {
		byStep[e.Step] = e
	}
	common, unhashed := 0, 0
	for _, ea := range a {
		eb, ok := byStep[ea.Step]
		if !ok {
			continue
		}
		if ea.Unhashed || eb.Unhashed {
			unhashed++
			continue
		}
		common++
		if ea.Digest != eb.Digest {
			fmt.Fprintf(env.Stdout, "DIVERGED at step %d: %s vs %s\ntensors: %s\n", ea.Step, ea.Digest, eb.Digest, tensorsText(ea, eb))
			if note := otherNumericsNote(fs.Arg(0), fs.Arg(1)); note != "" {
				fmt.Fprintln(env.Stdout, note)
			}
			return 1
		}
	}
	if common == 0 {
		why := "share no step"
		if unhashed > 0 {
			why = fmt.Sprintf("share %d steps but none hashed in both", unhashed)
		}
		fmt.Fprintf(env.Stderr, "easyscale verify: the ledgers of %s and %s %s; nothing to compare\n", fs.Arg(0), fs.Arg(1), why)
		return 2
	}
	skipped := ""
	if unhashed > 0 {
		skipped = fmt.Sprintf("; %d common steps unhashed in one run or both, not compared", unhashed)
	}
	fmt.Fprintf(env.Stdout, "OK: %d common steps agree (last %d%s)\n", common, lastCommon(a, byStep), skipped)
	return 0
}

// tensorsText names the tensors whose digests differ between two ledger
// rows of one step, or says why none can be named (a run recorded no
// per-tensor digests: a torch run of a version before they were recorded).
func tensorsText(a, b statedb.LedgerEntry) string {
	if len(a.TensorDigests) == 0 || len(b.TensorDigests) == 0 {
		return "not recorded in both runs (torch runs record them since issue 18; rerun the older one to compare tensors)"
	}
	diff := statedb.DivergentTensors(a.TensorDigests, b.TensorDigests)
	if len(diff) == 0 {
		return "none differs: the runs encode their tensors in another order or format (another engine or version)"
	}
	return strings.Join(diff, ", ")
}

// lastCommon is the last step hashed in both ledgers.
func lastCommon(a []statedb.LedgerEntry, b map[int64]statedb.LedgerEntry) int64 {
	var last int64
	for _, e := range a {
		if eb, ok := b[e.Step]; ok && !e.Unhashed && !eb.Unhashed && e.Step > last {
			last = e.Step
		}
	}
	return last
}

func readLedger(dir string) ([]statedb.LedgerEntry, error) {
	db, err := statedb.OpenReadOnly(dir)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	defer db.Close()
	l, err := db.Ledger(0, 1<<62)
	if err != nil {
		return nil, fmt.Errorf("reading the ledger of %s: %w", dir, err)
	}
	gaps, err := db.MissingLedgerSteps()
	if err != nil {
		return nil, fmt.Errorf("reading the ledger of %s: %w", dir, err)
	}
	if len(gaps) > 0 {
		return nil, fmt.Errorf("the ledger of %s lacks steps %s (rows deleted outside easyscale): it cannot be compared", dir, rangesText(gaps))
	}
	return l, nil
}

// rangesText lists step ranges as "7-9, 12".
func rangesText(rs []statedb.StepRange) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// jobsOf reads the job stored in each of two state directories.
func jobsOf(a, b string) (statedb.Job, statedb.Job, error) {
	var jobs [2]statedb.Job
	for i, dir := range []string{a, b} {
		db, err := statedb.OpenReadOnly(dir)
		if err != nil {
			return jobs[0], jobs[1], err
		}
		jobs[i], err = db.Job()
		db.Close()
		if err != nil {
			return jobs[0], jobs[1], err
		}
	}
	return jobs[0], jobs[1], nil
}

// otherNumericsNote says, for two state directories whose ledgers
// diverged, that their runs were computed with other numerics when their
// numerics records say so (a torch job moved to another CPU ISA, GPU model
// or torch release, and a run kept by its start-over): such runs are not
// expected to agree. "" when the records match, are missing or do not
// read.
func otherNumericsNote(dirA, dirB string) string {
	rec := func(dir string) string {
		db, err := statedb.OpenReadOnly(dir)
		if err != nil {
			return ""
		}
		defer db.Close()
		r, _ := db.Numerics()
		return r
	}
	diffs, err := torchengine.RecordDifferences(rec(dirA), rec(dirB), "A", "B")
	if err != nil || len(diffs) == 0 {
		return ""
	}
	return "note: the two runs were computed with other numerics (" + strings.Join(diffs, "; ") +
		"), so their steps are not expected to agree: compare each with a fixed run in its own environment"
}
