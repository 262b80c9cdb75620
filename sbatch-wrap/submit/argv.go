package submit

import (
	"strings"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
)

// argKind says whether an sbatch option takes an argument.
type argKind int

const (
	noArg argKind = iota
	requiredArg
	optionalArg // only as --opt=value
)

// longOptions are sbatch 22.05's long options (sbatch(1), src/common/slurm_opt.c)
// with their argument kind, plus the wrapper's own. getopt_long accepts any
// unambiguous prefix, and so does the scanner.
var longOptions = map[string]argKind{
	"account": requiredArg, "acctg-freq": requiredArg, "array": requiredArg, "batch": requiredArg,
	"bb": requiredArg, "bbf": requiredArg, "begin": requiredArg, "chdir": requiredArg,
	"cluster-constraint": requiredArg, "clusters": requiredArg, "comment": requiredArg,
	"constraint": requiredArg, "container": requiredArg, "contiguous": noArg, "core-spec": requiredArg,
	"cores-per-socket": requiredArg, "cpu-freq": requiredArg, "cpus-per-gpu": requiredArg,
	"cpus-per-task": requiredArg, "deadline": requiredArg, "delay-boot": requiredArg,
	"dependency": requiredArg, "distribution": requiredArg, "error": requiredArg, "exclude": requiredArg,
	"exclusive": optionalArg, "export": requiredArg, "export-file": requiredArg,
	"extra-node-info": requiredArg, "get-user-env": optionalArg, "gid": requiredArg,
	"gpu-bind": requiredArg, "gpu-freq": requiredArg, "gpus": requiredArg, "gpus-per-node": requiredArg,
	"gpus-per-socket": requiredArg, "gpus-per-task": requiredArg, "gres": requiredArg,
	"gres-flags": requiredArg, "help": noArg, "hint": requiredArg, "hold": noArg, "ignore-pbs": noArg,
	"input": requiredArg, "job-name": requiredArg, "kill-on-invalid-dep": requiredArg,
	"licenses": requiredArg, "mail-type": requiredArg, "mail-user": requiredArg, "mcs-label": requiredArg,
	"mem": requiredArg, "mem-bind": requiredArg, "mem-per-cpu": requiredArg, "mem-per-gpu": requiredArg,
	"mincpus": requiredArg, "network": requiredArg, "nice": optionalArg, "no-kill": optionalArg,
	"no-requeue": noArg, "nodefile": requiredArg, "nodelist": requiredArg, "nodes": requiredArg,
	"ntasks": requiredArg, "ntasks-per-core": requiredArg, "ntasks-per-gpu": requiredArg,
	"ntasks-per-node": requiredArg, "ntasks-per-socket": requiredArg, "open-mode": requiredArg,
	"output": requiredArg, "overcommit": noArg, "oversubscribe": noArg, "parsable": noArg,
	"partition": requiredArg, "power": requiredArg, "prefer": requiredArg, "priority": requiredArg,
	"profile": requiredArg, "propagate": optionalArg, "qos": requiredArg, "quiet": noArg,
	"reboot": noArg, "requeue": noArg, "reservation": requiredArg, "signal": requiredArg,
	"sockets-per-node": requiredArg, "spread-job": noArg, "switches": requiredArg,
	"test-only": noArg, "thread-spec": requiredArg, "threads-per-core": requiredArg,
	"time": requiredArg, "time-min": requiredArg, "tmp": requiredArg, "tres-per-task": requiredArg,
	"uid": requiredArg, "usage": noArg, "use-min-nodes": noArg, "verbose": noArg, "version": noArg,
	"wait": noArg, "wait-all-nodes": requiredArg, "wckey": requiredArg, "wrap": requiredArg,

	elastic.OptionElastic: requiredArg, elastic.OptionLogicalWorkers: requiredArg,
	elastic.OptionDeterminism: requiredArg, elastic.OptionSpeeds: requiredArg,
}

// shortWithArg are sbatch's short options that take an argument.
const shortWithArg = "aAbBcCdDeFGiJLmMnNopqStwx"

// Args is a scanned sbatch argument list.
type Args struct {
	Passed   []string         // the arguments the wrapper does not own, unchanged and in order
	Owned    elastic.Settings // the wrapper's options found
	Script   int              // index in Passed of the script path, -1 when none (stdin or --wrap)
	Wrap     bool             // --wrap given
	Nodes    bool             // -N/--nodes given
	NodesArg string           // its value (the last one given)
	Comment  bool             // --comment given
	HetJob   bool             // a ":" component separator
	Help     bool             // -h/--help given
	Parsable bool             // --parsable given
	NoKill   NoKill           // -k/--no-kill[=off] given: the user decides what a node failure does
}

// ScanArgs splits an sbatch argument list (without argv[0]) the way sbatch's
// getopt_long does: options up to the first non-option (the script) or
// "--"; "--opt value" and "--opt=value"; abbreviated long options; clustered
// short options ("-vN2"). Unknown options are passed through as flags
// without argument.
func ScanArgs(args []string) Args {
	a := Args{Script: -1}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			start := len(a.Passed)
			a.Passed = append(a.Passed, args[i:]...)
			if i+1 < len(args) {
				a.Script = start + 1
			}
			return a
		case arg == ":":
			a.HetJob = true
			a.Passed = append(a.Passed, arg)
		case strings.HasPrefix(arg, "--"):
			i = a.long(args, i)
		case len(arg) > 1 && arg[0] == '-':
			i = a.short(args, i)
		default:
			a.Script = len(a.Passed)
			a.Passed = append(a.Passed, args[i:]...)
			return a
		}
	}
	return a
}

// long handles args[i] = "--name[=value]" and returns the last index used.
func (a *Args) long(args []string, i int) int {
	name, value, hasValue := strings.Cut(args[i][2:], "=")
	full, kind := lookupLong(name)
	last := i
	if kind == requiredArg && !hasValue && i+1 < len(args) {
		value, hasValue, last = args[i+1], true, i+1
	}
	if s := a.owned(full); s != nil {
		*s = elastic.Setting{Set: true, Value: value, Origin: "--" + full}
		return last
	}
	a.note(full)
	if full == "nodes" {
		a.NodesArg = value
	}
	if full == "no-kill" {
		a.NoKill = noKillValue(value, hasValue)
	}
	a.Passed = append(a.Passed, args[i:last+1]...)
	return last
}

// NoKill is what the user asked for a node failure (sbatch -k/--no-kill[=off]):
// NoKillUnset, NoKillOn or NoKillOff.
type NoKill int

// The values of NoKill.
const (
	NoKillUnset NoKill = iota // not given
	NoKillOn                  // -k, --no-kill, --no-kill=VALUE other than off
	NoKillOff                 // --no-kill=off: Slurm ends the job when a node fails
)

// noKillValue reads the optional argument of --no-kill (and the value of
// SBATCH_NO_KILL) as sbatch does: "off", in any case, turns it off;
// anything else, or no value, turns it on.
func noKillValue(value string, hasValue bool) NoKill {
	if hasValue && strings.EqualFold(strings.TrimSpace(value), "off") {
		return NoKillOff
	}
	return NoKillOn
}

// short handles a cluster of short options and returns the last index used.
func (a *Args) short(args []string, i int) int {
	arg := args[i]
	last := i
	for j := 1; j < len(arg); j++ {
		c := arg[j]
		a.note(map[byte]string{'N': "nodes", 'h': "help", 'k': "no-kill"}[c])
		if strings.IndexByte(shortWithArg, c) >= 0 {
			value := arg[j+1:]
			if j == len(arg)-1 && i+1 < len(args) {
				last = i + 1
				value = args[i+1]
			}
			if c == 'N' {
				a.NodesArg = value
			}
			break
		}
	}
	a.Passed = append(a.Passed, args[i:last+1]...)
	return last
}

func (a *Args) note(full string) {
	switch full {
	case "nodes":
		a.Nodes = true
	case "comment":
		a.Comment = true
	case "wrap":
		a.Wrap = true
	case "help":
		a.Help = true
	case "parsable":
		a.Parsable = true
	case "no-kill":
		a.NoKill = NoKillOn // -k; the long form's value is read by long
	}
}

func (a *Args) owned(full string) *elastic.Setting {
	switch full {
	case elastic.OptionElastic:
		return &a.Owned.Elastic
	case elastic.OptionLogicalWorkers:
		return &a.Owned.LogicalWorkers
	case elastic.OptionDeterminism:
		return &a.Owned.Determinism
	case elastic.OptionSpeeds:
		return &a.Owned.Speeds
	}
	return nil
}

// lookupLong resolves an exact or uniquely abbreviated long option name; an
// unknown or ambiguous name comes back unchanged as a flag without argument.
func lookupLong(name string) (string, argKind) {
	if k, ok := longOptions[name]; ok {
		return name, k
	}
	match, kind, n := "", noArg, 0
	for full, k := range longOptions {
		if name != "" && strings.HasPrefix(full, name) {
			match, kind, n = full, k, n+1
		}
	}
	if n == 1 {
		return match, kind
	}
	return name, noArg
}
