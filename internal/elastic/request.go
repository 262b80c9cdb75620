package elastic

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Option names, without the leading "--", as registered by the SPANK plugin
// and understood by easyscale-sbatch.
const (
	OptionElastic        = "elastic"
	OptionLogicalWorkers = "logical-workers"
	OptionDeterminism    = "determinism"
	OptionSpeeds         = "speeds"
)

// Environment twins of the options; a flag given on the command line wins.
const (
	EnvElastic        = "EASYSCALE_ELASTIC"
	EnvLogicalWorkers = "EASYSCALE_LOGICAL_WORKERS"
	EnvDeterminism    = "EASYSCALE_DETERMINISM"
	EnvSpeeds         = "EASYSCALE_SPEEDS"
)

// MaxCount is the largest node count or logical-worker count accepted
// (larger than any Slurm cluster, small enough never to overflow an int32).
const MaxCount = 1000000

// maxDigits bounds the length of a count so parsing never overflows.
const maxDigits = 7

// Determinism is the accuracy-consistency level a job asks for.
type Determinism string

// Determinism levels; see the package documentation.
const (
	D1 Determinism = "d1"
	D2 Determinism = "d2"
)

// DefaultDeterminism is used when --determinism is not given.
const DefaultDeterminism = D1

// Request is a validated elastic request. A zero MinNodes (and MaxNodes) means
// the job is not elastic: its size is whatever the user allocated. A zero
// LogicalWorkers means the runtime fixes the count at the first start (to the
// initial number of physical workers).
type Request struct {
	MinNodes       int         // smallest node count the job accepts, 0 if not elastic
	MaxNodes       int         // largest node count the job can use, 0 if not elastic
	LogicalWorkers int         // logical workers (ESTs), 0 if unset
	Determinism    Determinism // d1 or d2, never empty
	// Speeds is the job's own throughput per GPU type relative to the
	// reference type (the comment's optional speeds= field, [ParseSpeeds]);
	// nil: the job does not say and the site's speed table applies.
	Speeds map[string]float64
}

// Elastic reports whether the request names a node range.
func (r Request) Elastic() bool { return r.MinNodes > 0 }

// Range returns the --elastic value in its canonical form ("2" or "1-4"), or
// "" when the request is not elastic.
func (r Request) Range() string {
	switch {
	case !r.Elastic():
		return ""
	case r.MinNodes == r.MaxNodes:
		return strconv.Itoa(r.MinNodes)
	default:
		return fmt.Sprintf("%d-%d", r.MinNodes, r.MaxNodes)
	}
}

// Environ returns the environment twins of the request in canonical form
// ("KEY=VALUE", in the order elastic, logical workers, determinism), leaving
// out the options the request does not set.
func (r Request) Environ() []string {
	var env []string
	if r.Elastic() {
		env = append(env, EnvElastic+"="+r.Range())
	}
	if r.LogicalWorkers > 0 {
		env = append(env, EnvLogicalWorkers+"="+strconv.Itoa(r.LogicalWorkers))
	}
	env = append(env, EnvDeterminism+"="+string(r.determinism()))
	if len(r.Speeds) > 0 {
		env = append(env, EnvSpeeds+"="+FormatSpeeds(r.Speeds))
	}
	return env
}

func (r Request) determinism() Determinism {
	if r.Determinism == "" {
		return DefaultDeterminism
	}
	return r.Determinism
}

// Validate checks the relations between the fields (each count in range, MIN
// <= MAX, MAX <= logical workers, each speed as [ParseSpeeds] accepts it) and returns an *OptionError naming the
// option at fault.
func (r Request) Validate() error {
	if r.Elastic() || r.MaxNodes != 0 {
		if err := checkRange(r.MinNodes, r.MaxNodes); err != nil {
			return &OptionError{Option: OptionElastic, Value: r.Range(), Err: err}
		}
	}
	if r.LogicalWorkers != 0 {
		if err := checkCount(r.LogicalWorkers); err != nil {
			return &OptionError{Option: OptionLogicalWorkers, Value: strconv.Itoa(r.LogicalWorkers), Err: err}
		}
	}
	if _, err := ParseDeterminism(string(r.determinism())); err != nil {
		return &OptionError{Option: OptionDeterminism, Value: string(r.Determinism), Err: err}
	}
	if len(r.Speeds) > 0 {
		if _, err := ParseSpeeds(FormatSpeeds(r.Speeds)); err != nil {
			return &OptionError{Option: "speeds", Value: FormatSpeeds(r.Speeds), Err: err}
		}
	}
	if r.Elastic() && r.LogicalWorkers > 0 && r.MaxNodes > r.LogicalWorkers {
		return &OptionError{Option: OptionElastic, Value: r.Range(),
			Err: detail(ErrTooManyNodes, "maximum %d nodes exceeds --logical-workers=%d (every node needs a logical worker)",
				r.MaxNodes, r.LogicalWorkers)}
	}
	return nil
}

// Errors wrapped by *OptionError; test with errors.Is.
var (
	ErrEmpty        = errors.New("empty value")
	ErrSyntax       = errors.New("not a decimal count")
	ErrOutOfRange   = errors.New("count out of range")
	ErrReversed     = errors.New("minimum larger than maximum")
	ErrTooManyNodes = errors.New("more nodes than logical workers")
	ErrDeterminism  = errors.New("unknown determinism level")
)

// detailError is a message that reads on its own yet wraps a sentinel cause.
type detailError struct {
	msg   string
	cause error
}

func (e *detailError) Error() string { return e.msg }
func (e *detailError) Unwrap() error { return e.cause }

func detail(cause error, format string, args ...any) error {
	return &detailError{msg: fmt.Sprintf(format, args...), cause: cause}
}

// OptionError reports a bad option value. Option is the option name without
// "--"; Origin says where the value came from ("--elastic",
// "EASYSCALE_ELASTIC", "job.sbatch:3"), empty for a plain flag.
type OptionError struct {
	Option string
	Value  string
	Origin string
	Err    error
}

// Error names the option, e.g. `invalid --elastic=4-2: minimum 4 larger than maximum 2`.
func (e *OptionError) Error() string {
	msg := fmt.Sprintf("invalid --%s=%s: %v", e.Option, e.Value, e.Err)
	if e.Origin != "" && e.Origin != "--"+e.Option {
		msg += " (from " + e.Origin + ")"
	}
	return msg
}

// Unwrap returns the underlying cause (one of the Err* values).
func (e *OptionError) Unwrap() error { return e.Err }

// ParseCount parses a node or logical-worker count: 1 to 7 decimal digits,
// value in [1, MaxCount]. Errors wrap ErrEmpty, ErrSyntax or ErrOutOfRange.
func ParseCount(s string) (int, error) {
	if s == "" {
		return 0, ErrEmpty
	}
	if len(s) > maxDigits || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	return n, checkCount(n)
}

func checkCount(n int) error {
	if n < 1 || n > MaxCount {
		return fmt.Errorf("%w: %d is not in [1, %d]", ErrOutOfRange, n, MaxCount)
	}
	return nil
}

func checkRange(lo, hi int) error {
	if err := checkCount(lo); err != nil {
		return err
	}
	if err := checkCount(hi); err != nil {
		return err
	}
	if lo > hi {
		return detail(ErrReversed, "minimum %d larger than maximum %d", lo, hi)
	}
	return nil
}

// ParseRange parses an --elastic value "MIN" or "MIN-MAX" into node counts.
// Errors wrap ErrEmpty, ErrSyntax, ErrOutOfRange or ErrReversed.
func ParseRange(s string) (lo, hi int, err error) {
	if strings.HasPrefix(s, "-") { // "-1" reads as an empty minimum otherwise (a new user's finding); the SPANK plugin's request.c says the same
		return 0, 0, detail(ErrOutOfRange, "a node count is at least 1, not negative: write MIN[-MAX], e.g. 1-4")
	}
	loText, hiText, isRange := strings.Cut(s, "-")
	if lo, err = ParseCount(loText); err != nil {
		return 0, 0, fmt.Errorf("minimum: %w", err)
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = ParseCount(hiText); err != nil {
		return 0, 0, fmt.Errorf("maximum: %w", err)
	}
	return lo, hi, checkRange(lo, hi)
}

// ParseDeterminism parses "d1" or "d2" (lower case, exactly). Errors wrap
// ErrEmpty or ErrDeterminism.
func ParseDeterminism(s string) (Determinism, error) {
	switch d := Determinism(s); d {
	case D1, D2:
		return d, nil
	case "":
		return "", ErrEmpty
	default:
		return "", fmt.Errorf("%w %q (want d1 or d2)", ErrDeterminism, s)
	}
}
