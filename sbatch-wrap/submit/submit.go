package submit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
)

// Plan is the sbatch invocation the wrapper will run.
type Plan struct {
	Args     []string         // sbatch arguments (without argv[0])
	Env      []string         // KEY=VALUE to add to (or replace in) the environment
	Request  *elastic.Request // nil for a job that is not an EasyScale job
	Script   []byte           // content of the private script copy; nil to use the user's file
	ScriptAt int              // index in Args of the script path to replace by the copy's path
	Stdin    []byte           // script read from stdin, to feed to sbatch; nil to inherit stdin
	Help     bool             // -h/--help: print the wrapper's help, then sbatch's when it works
}

// Input is what Prepare reads besides the arguments.
type Input struct {
	Lookup   func(string) (string, bool)  // environment (os.LookupEnv)
	ReadFile func(string) ([]byte, error) // script file reader (os.ReadFile)
	Stdin    func() ([]byte, error)       // reads the script from stdin when no path is given
}

// Node failure: sbatch's -k/--no-kill keeps the job (otherwise Slurm
// requeues or cancels it when an allocated node fails), srun's, read from
// SLURM_NO_KILL in the job's environment, keeps the step's tasks on the
// other nodes (otherwise Slurm kills the whole step). SBATCH_NO_KILL is
// sbatch's own twin of --no-kill. In Slurm 22.05 SLURM_NO_KILL must be
// "set" (or empty) to mean on; "1", "yes" or "on" are refused by srun
// ("Invalid --no-kill specification").
const (
	EnvSbatchNoKill = "SBATCH_NO_KILL"
	EnvStepNoKill   = "SLURM_NO_KILL"
	stepNoKillOn    = "set"
)

// ErrConflict is wrapped by errors about options the wrapper sets itself.
var ErrConflict = errors.New("conflicts with the EasyScale request")

// Prepare decides the sbatch invocation for args (without argv[0]). It
// reads the script only to find directives and never changes what sbatch
// is asked beyond what the package doc lists. Errors say what was wrong and
// where (an *elastic.OptionError, a *DirectiveError, or an ErrConflict).
func Prepare(args []string, in Input) (Plan, error) {
	a := ScanArgs(args)
	p := Plan{Args: a.Passed, ScriptAt: -1, Help: a.Help}
	if a.Help {
		return p, nil
	}
	script, err := readScript(a, in, &p)
	if err != nil {
		return Plan{}, err
	}
	settings := elastic.Merge(a.Owned, script.Owned, elastic.FromEnv(in.Lookup))
	if !settings.Any() {
		for _, sp := range []elastic.Setting{a.Owned.Speeds, script.Owned.Speeds} {
			if sp.Set { // sbatch has no --speeds: it would refuse it, or the job lose it
				return Plan{}, fmt.Errorf("%s %w: --speeds describes an EasyScale job; add --elastic or --logical-workers, or remove it", sp.Origin, ErrConflict)
			}
		}
		return p, nil
	}
	req, err := settings.Request()
	if err != nil {
		return Plan{}, err
	}
	if err := conflicts(a, script, req); err != nil {
		return Plan{}, err
	}
	if script.Hidden != nil {
		if p.Stdin != nil {
			p.Stdin = script.Hidden
		} else {
			p.Script, p.ScriptAt = script.Hidden, a.Script
		}
	}
	p.Request = &req
	p.Env = req.Environ()
	var pre []string
	if req.Elastic() {
		if !a.Nodes && !script.Nodes { // else the user's -N, in the range, is the start size
			pre = append(pre, "--nodes="+strconv.Itoa(req.MinNodes))
		}
		pre, p.Env = survivesNodeFailure(a, script, in.Lookup, pre, p.Env)
	}
	pre = append(pre, "--comment="+elastic.Comment{Request: req}.String())
	p.Args = append(pre, a.Passed...)
	if p.ScriptAt >= 0 {
		p.ScriptAt += len(pre)
	}
	return p, nil
}

// survivesNodeFailure makes an elastic job outlive the failure of one of
// its nodes, as a shrink: --no-kill for the job unless the user set
// -k/--no-kill (command line, SBATCH_NO_KILL or directive, which sbatch
// reads in that order of precedence), and SLURM_NO_KILL=set for its srun
// steps unless the environment sets it. A user who turned it off
// (--no-kill=off) gets neither: Slurm then ends the job when a node fails,
// as the user asked.
func survivesNodeFailure(a Args, s Script, lookup func(string) (string, bool), pre, env []string) ([]string, []string) {
	asked := a.NoKill
	if v, set := lookup(EnvSbatchNoKill); asked == NoKillUnset && set {
		asked = noKillValue(v, v != "")
	}
	if asked == NoKillUnset {
		asked = s.NoKill
	}
	switch asked {
	case NoKillOff:
		return pre, env
	case NoKillUnset:
		pre = append(pre, "--no-kill")
	}
	if _, set := lookup(EnvStepNoKill); !set {
		env = append(env, EnvStepNoKill+"="+stepNoKillOn)
	}
	return pre, env
}

func readScript(a Args, in Input, p *Plan) (Script, error) {
	var data []byte
	var err error
	name := "(stdin)"
	switch {
	case a.Wrap:
		return Script{}, nil
	case a.Script >= 0:
		name = a.Passed[a.Script]
		data, err = in.ReadFile(name)
	default:
		data, err = in.Stdin()
		p.Stdin = data
	}
	if err != nil {
		return Script{}, fmt.Errorf("read batch script %s: %w", name, err)
	}
	return ScanScript(data, name)
}

func conflicts(a Args, s Script, req elastic.Request) error {
	switch {
	case a.Comment || s.Comment:
		return fmt.Errorf("--comment %w: easyscale-sbatch records the request in the job comment", ErrConflict)
	case a.HetJob || s.HetJob:
		return fmt.Errorf("a heterogeneous job %w: EasyScale jobs have one component", ErrConflict)
	case req.Elastic() && (a.Nodes || s.Nodes):
		return startNodes(a, s, req)
	}
	return nil
}

// startNodes checks the -N/--nodes of an elastic job (the command line's,
// else the script's): one node count from the --elastic minimum to its
// maximum, the size the job starts at and the backfill planner's request R
// (it can shrink to the minimum and grow to the maximum). Without -N the
// job starts at its minimum.
func startNodes(a Args, s Script, req elastic.Request) error {
	v := s.NodesArg
	if a.Nodes {
		v = a.NodesArg
	}
	n, err := elastic.ParseCount(v)
	if err != nil || n < req.MinNodes || n > req.MaxNodes {
		return fmt.Errorf("--nodes/-N %q %w: give one node count from the --elastic minimum %d to its maximum %d (the size to start at), or leave it out to start at %d",
			v, ErrConflict, req.MinNodes, req.MaxNodes, req.MinNodes)
	}
	return nil
}

// Stdio are the streams of the sbatch process.
type Stdio struct {
	In       io.Reader
	Out, Err io.Writer
}

// writeScriptCopy writes the private copy under a fresh temporary directory,
// keeping the base name, and returns its path and a cleanup function.
func writeScriptCopy(orig string, data []byte) (string, func(), error) {
	dir, err := os.MkdirTemp("", "easyscale-sbatch-")
	if err != nil {
		return "", nil, fmt.Errorf("create script copy: %w", err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	path := filepath.Join(dir, filepath.Base(orig))
	if err := os.WriteFile(path, data, 0o700); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("write script copy: %w", err)
	}
	return path, cleanup, nil
}
