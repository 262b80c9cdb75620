package trainer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/jobspec"
	"github.com/easyscale/easyscale-slurm/runtime/optim"
	"github.com/easyscale/easyscale-slurm/statedb"
)

// Checkpoint tensor names: "param/<name>", "optim/<name>" and
// "est<id>/<buffer name>"; the EST cursors travel as context blobs.
const (
	paramPrefix = "param/"
	optimPrefix = "optim/"
)

// openState opens the state database, checks that it belongs to this job
// and restores the newest valid checkpoint into net, opt and the EST
// contexts.
func (j *job) openState() error {
	db, err := statedb.OpenWith(j.opts.StateDir, statedb.Options{AllowNetworkFS: j.opts.AllowNetworkFS})
	if err != nil {
		return fmt.Errorf("opening state directory %s: %w", j.opts.StateDir, err)
	}
	j.db = db
	spec := j.opts.Spec
	existing, err := db.InitJob(statedb.Job{ID: spec.ID(), Name: spec.Name, Spec: spec.Canonical(), LogicalWorkers: j.n, Created: time.Now(),
		Data: dataFiles(j.opts.Workload.Data())})
	if errors.Is(err, statedb.ErrJobMismatch) {
		if old, jerr := db.Job(); jerr == nil {
			if diff := jobspec.Diff(old.Spec, spec.Canonical()); len(diff) > 0 {
				return fmt.Errorf("state directory %s: %w (fields that differ: %s)", j.opts.StateDir, err, strings.Join(diff, ", "))
			}
		}
	}
	var dm *statedb.DataMismatchError
	if errors.As(err, &dm) {
		for _, f := range j.opts.Workload.Data() {
			if f.Name == dm.File && f.Path != "" {
				return fmt.Errorf("%w (this run read %s)", err, f.Path)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("state directory %s: %w", j.opts.StateDir, err)
	}
	if !existing {
		return nil
	}
	ck, skipped, err := db.LatestCheckpoint()
	for _, s := range skipped {
		j.log.Warn("skipping unusable checkpoint", "error", s)
	}
	if err != nil {
		return fmt.Errorf("reading checkpoints in %s: %w", j.opts.StateDir, err)
	}
	var from int64
	if ck != nil {
		from = ck.Step
	}
	if err := j.warnCorruptLedger(from); err != nil {
		return err
	}
	if ck == nil {
		j.log.Info("no usable checkpoint; starting from step 0", "state", j.opts.StateDir)
		return nil
	}
	if err := j.restore(ck); err != nil {
		return fmt.Errorf("restoring checkpoint %s: %w", ck.Path, err)
	}
	j.step, j.resumedFrom = ck.Step, ck.Step
	if rows, err := db.Ledger(ck.Step, ck.Step); err == nil && len(rows) == 1 {
		j.lastLoss = rows[0].Loss // the loss a run that resumes at its end reports
	}
	j.log.Info("resumed", "step", ck.Step, "checkpoint", ck.Path)
	return nil
}

// warnCorruptLedger warns about each ledger row that does not match its
// checksum, naming its step: a row after from (the step the run resumes
// at) is rewritten when the step is recomputed, an earlier one stays and
// `easyscale verify` and `status` report it.
func (j *job) warnCorruptLedger(from int64) error {
	bad, err := j.db.CheckLedger()
	if err != nil {
		return fmt.Errorf("checking the ledger in %s: %w", j.opts.StateDir, err)
	}
	for _, step := range bad {
		fix := "it is before the checkpoint the run resumes from and stays unverifiable; easyscale verify and status report it"
		if step > from {
			fix = "the resumed run recomputes the step and rewrites the row, but cannot compare it with the original"
		}
		j.log.Warn("ledger row does not match its checksum: changed outside easyscale", "step", step,
			"state", j.opts.StateDir, "consequence", fix)
	}
	return nil
}

// dataFiles is the job-identity form of a workload's data manifest.
func dataFiles(m data.Manifest) []statedb.DataFile {
	out := make([]statedb.DataFile, len(m))
	for i, f := range m {
		out[i] = statedb.DataFile{Name: f.Name, Size: f.Size, SHA256: f.SHA256}
	}
	return out
}

func (j *job) restore(ck *statedb.Checkpoint) error {
	byName := make(map[string]statedb.Tensor, len(ck.Tensors))
	for _, t := range ck.Tensors {
		byName[t.Name] = t
	}
	load := func(name string, dst []float32) error {
		t, ok := byName[name]
		if !ok {
			return fmt.Errorf("tensor %s missing", name)
		}
		if len(t.Data) != len(dst) {
			return fmt.Errorf("tensor %s has %d values, the model needs %d", name, len(t.Data), len(dst))
		}
		copy(dst, t.Data)
		return nil
	}
	for _, p := range j.master.Params {
		if err := load(paramPrefix+p.Name, p.T.Data); err != nil {
			return err
		}
	}
	var st []optim.NamedSlice
	for _, t := range ck.Tensors {
		if name, ok := strings.CutPrefix(t.Name, optimPrefix); ok {
			st = append(st, optim.NamedSlice{Name: name, Data: t.Data})
		}
	}
	if err := j.master.Opt.LoadState(st); err != nil {
		return fmt.Errorf("optimizer state: %w", err)
	}
	if len(ck.Contexts) != j.n {
		return fmt.Errorf("%d EST contexts saved, the job has %d logical workers", len(ck.Contexts), j.n)
	}
	for _, sc := range ck.Contexts {
		if sc.EST < 0 || sc.EST >= j.n {
			return fmt.Errorf("context of EST %d out of range", sc.EST)
		}
		c := j.ests[sc.EST]
		if err := c.Unmarshal(sc.Blob); err != nil {
			return err
		}
		for _, b := range c.Buffers {
			if err := load(estPrefix(c.ID)+b.Name, b.T.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

func estPrefix(id int) string { return "est" + strconv.Itoa(id) + "/" }

// checkpoint saves the coordinator's replica, its optimizer state and every EST
// context at the current step.
func (j *job) checkpoint() error {
	t0 := time.Now()
	var ts []statedb.Tensor
	for _, p := range j.master.Params {
		ts = append(ts, statedb.Tensor{Name: paramPrefix + p.Name, Shape: p.T.Shape, Data: p.T.Data})
	}
	for _, s := range j.master.Opt.State() {
		ts = append(ts, statedb.Tensor{Name: optimPrefix + s.Name, Shape: []int{len(s.Data)}, Data: s.Data})
	}
	ctxs := make([]statedb.ESTContext, j.n)
	for e, c := range j.ests {
		ctxs[e] = statedb.ESTContext{EST: e, Blob: c.Marshal()}
		for _, b := range c.Buffers {
			ts = append(ts, statedb.Tensor{Name: estPrefix(e) + b.Name, Shape: b.T.Shape, Data: b.T.Data})
		}
	}
	meta := map[string]string{"job_id": j.opts.Spec.ID(), "step": strconv.FormatInt(j.step, 10), "digest": j.digest}
	if err := j.db.SaveCheckpoint(j.step, ts, ctxs, meta); err != nil {
		return fmt.Errorf("checkpointing step %d: %w", j.step, err)
	}
	j.log.Debug("checkpoint", "step", j.step, "ms", time.Since(t0).Milliseconds())
	return nil
}
