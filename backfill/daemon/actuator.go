package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// ExtraSpec is everything sbatch needs to submit one extra job.
type ExtraSpec struct {
	// Parent is the elastic job's id; User and Account its owner and account
	// ("" account: the user's default); UID the owner's numeric uid
	// (squeue's UserId; "" when not known), which User must give (see
	// [SlurmActuator.Submit]).
	Parent, User, UID, Account string
	// Group is the numeric group id root submits with beside --uid=User: the
	// user's primary group in the password database, and GroupName its
	// name, which --gid names when set (see [SlurmActuator.Submit]). Without
	// --gid, `sbatch --uid` as root runs the job with group root (measured
	// on Slurm 22.05: `id` printed gid=0(root)).
	Group, GroupName string
	// Partition and QOS of the extra job ("" QOS: the partition's default).
	Partition, QOS string
	// Node, GPUType ("" for untyped GRES) and GPUs (0: no GRES, a CPU node).
	Node, GPUType string
	GPUs          int
	// TimeLimitMinutes is the extra job's --time (Slurm limits are whole
	// minutes), ≥ 1.
	TimeLimitMinutes int64
	// WorkDir is the parent's working directory, also the extra job's (so
	// relative paths, e.g. of data sets, resolve as in the parent).
	WorkDir string
	// Rendezvous is the parent's WorkDir/.easyscale/JOBID; the job's output
	// goes to Rendezvous/extra-<id>.out.
	Rendezvous string
	// Script is the batch script, passed to sbatch --wrap.
	Script string
}

// Args returns the sbatch arguments for the spec (without the leading
// "sbatch"), as the contract with the runtime fixes them: one node, one task
// per lent GPU (--ntasks=GPUs, and SLURM_GPUS_PER_TASK=1 exported to the
// script so that its srun starts one `easyscale worker` per GPU, each bound
// to its own GPU; on Slurm 22.05 sbatch refuses --gpus-per-task=1 beside a
// typed --gres, "with and without type identification", while srun inside
// the job accepts it and squeue keeps TRES-per-node, which the snapshot
// reads), the lent GPUs as --gres, --no-requeue (a preempted extra job must end, not
// come back at a time nobody planned), job name es-extra-<JOBID> and comment
// "es-extra parent=<JOBID>". asRoot adds --uid=User and --gid=GroupName
// (--gid=Group without one) so that root submits as the owner, in their
// group. Names, not numbers: Slurm looks the value of --uid and --gid up as
// a name first, so --uid=23184 runs the job as an account named "23184" if
// there is one, whatever its uid (helper 84's finding on 22.05 and 24.11);
// Submit checks that the names give the numbers. The user must exist on
// the submit host, and a spec without Group is refused (the job would run
// with group root).
func (s ExtraSpec) Args(asRoot bool) ([]string, error) {
	if s.TimeLimitMinutes < 1 {
		return nil, fmt.Errorf("extra job for %s: time limit %d minutes, want ≥ 1", s.Parent, s.TimeLimitMinutes)
	}
	if s.Node == "" || s.Parent == "" || s.Partition == "" || s.Script == "" {
		return nil, fmt.Errorf("extra job for %q: node %q, partition %q and script are required", s.Parent, s.Node, s.Partition)
	}
	args := []string{"--parsable",
		"--job-name=" + ExtraJobName(s.Parent),
		"--comment=" + ExtraComment(s.Parent),
		"--partition=" + s.Partition,
		"--nodes=1", "--ntasks=" + strconv.Itoa(max(1, s.GPUs)),
		"--nodelist=" + s.Node,
		"--time=" + strconv.FormatInt(s.TimeLimitMinutes, 10),
		"--no-requeue",
	}
	if s.GPUs > 0 {
		if s.GPUType == "" {
			args = append(args, fmt.Sprintf("--gres=gpu:%d", s.GPUs))
		} else {
			args = append(args, fmt.Sprintf("--gres=gpu:%s:%d", s.GPUType, s.GPUs))
		}
		args = append(args, "--export=ALL,SLURM_GPUS_PER_TASK=1")
	}
	if s.QOS != "" {
		args = append(args, "--qos="+s.QOS)
	}
	if s.Account != "" {
		args = append(args, "--account="+s.Account)
	}
	if asRoot && s.User != "" && s.User != "root" {
		if !slurmcli.Digits(s.Group) {
			return nil, fmt.Errorf("extra job for %s: user %s has no numeric group %q to submit with (--gid); root would run the job with group root", s.Parent, s.User, s.Group)
		}
		args = append(args, "--uid="+s.User, "--gid="+cmp.Or(s.GroupName, s.Group))
	}
	if s.WorkDir != "" {
		args = append(args, "--chdir="+s.WorkDir)
	}
	if s.Rendezvous != "" {
		args = append(args, "--output="+filepath.Join(s.Rendezvous, "extra-%j.out"))
	}
	return append(args, "--wrap="+s.Script), nil
}

// ownerGroup is the name --gid should give for group id gid: the group's
// name when the group database has one that gives gid back; "" (pass gid
// itself) when gid has no name and no group is named with its digits.
// Slurm looks --gid up as a name first, so digits that name another group
// would run the job in that group: an error, as is a name that gives
// another gid.
func ownerGroup(gid string) (string, error) {
	g, err := user.LookupGroupId(gid)
	if err != nil {
		if other, err := user.LookupGroup(gid); err == nil {
			return "", fmt.Errorf("group id %s has no name, and group %q (gid %s) is named with its digits: --gid would name that group", gid, other.Name, other.Gid)
		}
		return "", nil
	}
	if back, err := user.LookupGroup(g.Name); err != nil || back.Gid != gid {
		return "", fmt.Errorf("group id %s is named %q, which does not give it back (%v): --gid cannot name it", gid, g.Name, err)
	}
	return g.Name, nil
}

// WorkerScript fills the worker_command template for the elastic job id
// whose rendezvous directory is dir: {job_id}, {rendezvous},
// {coordinator_file} and {token_file}, each shell-quoted.
func WorkerScript(template, id, dir string) string {
	return strings.NewReplacer(
		"{job_id}", shellQuote(id),
		"{rendezvous}", shellQuote(dir),
		"{coordinator_file}", shellQuote(filepath.Join(dir, "coordinator")),
		"{token_file}", shellQuote(filepath.Join(dir, "token")),
	).Replace(template)
}

// shellQuote returns s as one POSIX shell word.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// SubmitEnv is the environment sbatch runs in when the daemon submits an
// extra job: PATH (where srun and easyscale are found) and SLURM_CONF from
// environ, the daemon's, and nothing else. sbatch --export=ALL hands the
// submitter's environment to the job over the user's login environment
// (root's --uid loads it: HOME, SHELL, a ~/.bash_profile variable, measured
// on 22.05), and a root daemon's HOME=/root and other variables are not the
// user's; an explicit --export list instead would also hold for every srun
// in the script, dropping what the script sets (measured on 22.05). The
// job's `easyscale worker` then starts again on the job's own environment,
// which its coordinator published in the rendezvous directory
// (runtime/slurmjob.EnvironmentFile).
func SubmitEnv(environ []string) []string {
	out := []string{} // never nil: a nil environment is the daemon's whole one (os/exec)
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); k == "PATH" || k == "SLURM_CONF" {
			out = append(out, kv)
		}
	}
	return out
}

// Actuator applies the daemon's decisions to Slurm.
type Actuator interface {
	// Submit submits an extra job and returns its Slurm job id.
	Submit(ctx context.Context, spec ExtraSpec) (string, error)
	// Signal sends SIGTERM to the extra job's steps (the worker hands its
	// logical workers back at the next step boundary and exits 0).
	Signal(ctx context.Context, id string) error
	// Cancel cancels the extra job outright.
	Cancel(ctx context.Context, id string) error
}

// SlurmActuator is the Actuator over sbatch and scancel.
type SlurmActuator struct {
	Slurm slurmcli.Runner
	// AsRoot submits with --uid=<user> (set when the daemon runs as root).
	AsRoot bool
}

var _ Actuator = (*SlurmActuator)(nil)

// Submit runs `sbatch ARGS` (see [ExtraSpec.Args]) and returns the job id
// sbatch --parsable printed. As root it looks the user up in the password
// database (getpwnam): a user it does not know, or one whose uid is not
// spec.UID (when set), is an error and nothing is submitted; a spec without
// Group gets the user's primary group, and one without GroupName the
// group's name (ownerGroup). A failed sbatch is an error wrapping its
// *slurmcli.CommandError (stderr, exit status), which the daemon
// classifies as the job's or Slurm's (planner.SubmitFailure).
func (a *SlurmActuator) Submit(ctx context.Context, spec ExtraSpec) (string, error) {
	if a.AsRoot && spec.User != "" && spec.User != "root" {
		u, err := user.Lookup(spec.User)
		if err != nil {
			return "", fmt.Errorf("submitting extra job for %s: looking up user %s: %w", spec.Parent, spec.User, err)
		}
		if spec.UID != "" && u.Uid != spec.UID {
			return "", fmt.Errorf("submitting extra job for %s: user %s has uid %s, not the job's uid %s", spec.Parent, spec.User, u.Uid, spec.UID)
		}
		if spec.Group == "" {
			spec.Group = u.Gid
		}
		if spec.GroupName == "" {
			if spec.GroupName, err = ownerGroup(spec.Group); err != nil {
				return "", fmt.Errorf("submitting extra job for %s as user %s: %w", spec.Parent, spec.User, err)
			}
		}
	}
	args, err := spec.Args(a.AsRoot)
	if err != nil {
		return "", err
	}
	out, err := a.Slurm.OutputEnv(ctx, SubmitEnv(a.Slurm.Environ()), "sbatch", args...)
	if err != nil {
		return "", fmt.Errorf("submitting extra job for %s on %s: %w", spec.Parent, spec.Node, err)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if !slurmcli.Digits(id) {
		return "", fmt.Errorf("submitting extra job for %s: %w: %q", spec.Parent, errNoJobID, strings.TrimSpace(string(out)))
	}
	return id, nil
}

// Signal runs `scancel --signal=TERM ID`. A job Slurm no longer knows is
// not an error (it is already gone).
func (a *SlurmActuator) Signal(ctx context.Context, id string) error {
	return a.scancel(ctx, "signalling", "--signal=TERM", id)
}

// Cancel runs `scancel ID`; a job Slurm no longer knows is not an error.
func (a *SlurmActuator) Cancel(ctx context.Context, id string) error {
	return a.scancel(ctx, "cancelling", id)
}

func (a *SlurmActuator) scancel(ctx context.Context, what string, args ...string) error {
	_, err := a.Slurm.Output(ctx, "scancel", args...)
	var ce *slurmcli.CommandError
	if errors.As(err, &ce) && (strings.Contains(ce.Stderr, "Invalid job id") || strings.Contains(ce.Stderr, "already completing or completed")) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s extra job %s: %w", what, args[len(args)-1], err)
	}
	return nil
}
