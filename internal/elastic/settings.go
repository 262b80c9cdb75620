package elastic

import "errors"

// Setting is one option value as the user typed it. Set distinguishes
// "--elastic=" (set, empty, refused) from an option never given.
type Setting struct {
	Set    bool   // the option was given
	Value  string // its value, untrimmed
	Origin string // where it came from, for error messages: "--elastic", "EASYSCALE_ELASTIC", "job.sbatch:3"
}

// Settings holds the options of one source (command line, script
// directives or environment) before validation.
type Settings struct {
	Elastic        Setting
	LogicalWorkers Setting
	Determinism    Setting
	// Speeds is the job's own throughput per GPU type (--speeds,
	// EASYSCALE_SPEEDS: TYPE:SPEED,..., [ParseSpeeds]), which the backfill
	// planner prefers to the site's speed table. Alone it does not make a
	// job an EasyScale job.
	Speeds Setting
}

// Any reports whether any of --elastic, --logical-workers and
// --determinism is set, that is whether the job asks to be an EasyScale
// job at all.
func (s Settings) Any() bool {
	return s.Elastic.Set || s.LogicalWorkers.Set || s.Determinism.Set
}

// FromEnv reads the environment twins through lookup (os.LookupEnv in
// production). A variable that is present but empty counts as not set, so
// `EASYSCALE_ELASTIC= srun …` behaves like no variable at all.
func FromEnv(lookup func(string) (string, bool)) Settings {
	get := func(name string) Setting {
		v, ok := lookup(name)
		return Setting{Set: ok && v != "", Value: v, Origin: name}
	}
	return Settings{
		Elastic:        get(EnvElastic),
		LogicalWorkers: get(EnvLogicalWorkers),
		Determinism:    get(EnvDeterminism),
		Speeds:         get(EnvSpeeds),
	}
}

// Merge returns, option by option, the first set value among layers; pass
// the layers from highest to lowest precedence (flags, then directives, then
// environment).
func Merge(layers ...Settings) Settings {
	var out Settings
	for _, l := range layers {
		out.Elastic = first(out.Elastic, l.Elastic)
		out.LogicalWorkers = first(out.LogicalWorkers, l.LogicalWorkers)
		out.Determinism = first(out.Determinism, l.Determinism)
		out.Speeds = first(out.Speeds, l.Speeds)
	}
	return out
}

func first(have, next Setting) Setting {
	if have.Set {
		return have
	}
	return next
}

// Request parses and validates the settings. The error is an *OptionError
// naming the option and, through Origin, where its value came from.
func (s Settings) Request() (Request, error) {
	var r Request
	var err error
	if s.Elastic.Set {
		if r.MinNodes, r.MaxNodes, err = ParseRange(s.Elastic.Value); err != nil {
			return Request{}, s.Elastic.fail(OptionElastic, err)
		}
	}
	if s.LogicalWorkers.Set {
		if r.LogicalWorkers, err = ParseCount(s.LogicalWorkers.Value); err != nil {
			return Request{}, s.LogicalWorkers.fail(OptionLogicalWorkers, err)
		}
	}
	r.Determinism = DefaultDeterminism
	if s.Determinism.Set {
		if r.Determinism, err = ParseDeterminism(s.Determinism.Value); err != nil {
			return Request{}, s.Determinism.fail(OptionDeterminism, err)
		}
	}
	if s.Speeds.Set {
		if r.Speeds, err = ParseSpeeds(s.Speeds.Value); err != nil {
			return Request{}, s.Speeds.fail(OptionSpeeds, err)
		}
	}
	if err := r.Validate(); err != nil {
		var oe *OptionError
		if errors.As(err, &oe) {
			oe.Origin = s.origin(oe.Option)
		}
		return Request{}, err
	}
	return r, nil
}

func (s Setting) fail(option string, err error) error {
	return &OptionError{Option: option, Value: s.Value, Origin: s.Origin, Err: err}
}

func (s Settings) origin(option string) string {
	switch option {
	case OptionElastic:
		return s.Elastic.Origin
	case OptionLogicalWorkers:
		return s.LogicalWorkers.Origin
	case OptionSpeeds:
		return s.Speeds.Origin
	default:
		return s.Determinism.Origin
	}
}
