package elastic

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Comment prefixes: the submission form and the runtime's status form.
const (
	RequestPrefix = "es-req"
	StatusPrefix  = "es"
)

// maxCommentLen bounds what ParseComment reads; Slurm comments of EasyScale
// jobs are far shorter.
const maxCommentLen = 1024

// Progress is the runtime's part of the status comment.
type Progress struct {
	Step       int // steps done, >= 0
	TotalSteps int // steps planned, >= Step
	Workers    int // physical workers now, >= 1
	// StartsOver says the run starts the job over from step 0 where its
	// checkpoint was computed with other numerics (easyscale run
	// --on-other-numerics=start-over, torch jobs): a d1 job that names no
	// GPU type may then be moved to another type (the backfill daemon's
	// move_to_faster), which its checkpoint would not resume on. Written
	// as numerics=start-over, only when set.
	StartsOver bool
}

// StartOverValue is the value of the status form's numerics= field.
const StartOverValue = "start-over"

// Comment is what an EasyScale job keeps in its Slurm comment: the request,
// and once the job runs, the runtime's progress (nil before).
type Comment struct {
	Request  Request
	Progress *Progress
}

// String encodes the comment:
//
//	es-req min=1 max=4 lw=8 d1                 (Progress == nil)
//	es step=1200/5000 workers=6/8 d1 req=1-4   (Progress != nil)
//	es step=1200/5000 workers=6/8 d1 req=1-4 numerics=start-over   (Progress.StartsOver)
//
// Fields the request does not set are left out (min/max/req= for a job that
// is not elastic, lw= for unset logical workers; workers=W/L then reads
// workers=W; speeds= for a job without its own speeds). The optional
// speeds=TYPE:SPEED,... field ([ParseSpeeds]) comes last in either form:
// an older reader skips it as an unknown key=value token. The output always
// parses back with ParseComment.
func (c Comment) String() string {
	r := c.Request
	var b strings.Builder
	if c.Progress == nil {
		b.WriteString(RequestPrefix)
		if r.Elastic() {
			fmt.Fprintf(&b, " min=%d max=%d", r.MinNodes, r.MaxNodes)
		}
		if r.LogicalWorkers > 0 {
			fmt.Fprintf(&b, " lw=%d", r.LogicalWorkers)
		}
		fmt.Fprintf(&b, " %s", r.determinism())
		writeSpeeds(&b, r.Speeds)
		return b.String()
	}
	p := c.Progress
	fmt.Fprintf(&b, "%s step=%d/%d workers=%d", StatusPrefix, p.Step, p.TotalSteps, p.Workers)
	if r.LogicalWorkers > 0 {
		fmt.Fprintf(&b, "/%d", r.LogicalWorkers)
	}
	fmt.Fprintf(&b, " %s", r.determinism())
	if r.Elastic() {
		fmt.Fprintf(&b, " req=%d-%d", r.MinNodes, r.MaxNodes)
	}
	if p.StartsOver {
		b.WriteString(" numerics=" + StartOverValue)
	}
	writeSpeeds(&b, r.Speeds)
	return b.String()
}

// writeSpeeds appends the optional speeds= field (nothing for no speeds).
// It comes last, so a reader that predates it skips an unknown key=value
// token and reads the rest as before.
func writeSpeeds(b *strings.Builder, speeds map[string]float64) {
	if len(speeds) > 0 {
		b.WriteString(" speeds=")
		b.WriteString(FormatSpeeds(speeds))
	}
}

// CommentError reports a job comment that is not in either EasyScale form.
// Field is the token at fault ("" for the comment as a whole).
type CommentError struct {
	Comment string
	Field   string
	Err     error
}

// Error says which token of which comment failed.
func (e *CommentError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("parse job comment %q: %v", e.Comment, e.Err)
	}
	return fmt.Sprintf("parse job comment %q: field %q: %v", e.Comment, e.Field, e.Err)
}

// Unwrap returns the cause.
func (e *CommentError) Unwrap() error { return e.Err }

// ErrNotEasyScale is wrapped by the *CommentError returned for a comment that
// starts with neither "es-req " nor "es " (a job that is not ours).
var ErrNotEasyScale = errors.New("not an EasyScale comment")

// ParseComment decodes either form written by Comment.String. Tokens are
// separated by single or repeated spaces; unknown key=value tokens are
// skipped so the runtime may add fields later; a repeated known key, a bare
// unknown word or a bad number is an error. The request is validated
// (Request.Validate). Errors are *CommentError.
func ParseComment(s string) (Comment, error) {
	if len(s) > maxCommentLen {
		return Comment{}, &CommentError{Comment: s[:64] + "…", Err: fmt.Errorf("longer than %d bytes", maxCommentLen)}
	}
	fields := strings.Fields(s)
	if len(fields) == 0 || (fields[0] != RequestPrefix && fields[0] != StatusPrefix) {
		return Comment{}, &CommentError{Comment: s, Err: ErrNotEasyScale}
	}
	d := commentDecoder{status: fields[0] == StatusPrefix, seen: map[string]bool{}}
	if d.status {
		d.c.Progress = &Progress{}
	}
	for _, f := range fields[1:] {
		if err := d.field(f); err != nil {
			return Comment{}, &CommentError{Comment: s, Field: f, Err: err}
		}
	}
	if err := d.finish(); err != nil {
		return Comment{}, &CommentError{Comment: s, Err: err}
	}
	return d.c, nil
}

type commentDecoder struct {
	c      Comment
	status bool
	seen   map[string]bool
}

func (d *commentDecoder) field(f string) error {
	key, val, hasVal := strings.Cut(f, "=")
	if !hasVal {
		key = "determinism"
		val = f
	}
	if d.seen[key] {
		return errors.New("repeated")
	}
	d.seen[key] = true
	switch {
	case key == "determinism":
		det, err := ParseDeterminism(val)
		d.c.Request.Determinism = det
		return err
	case key == "speeds":
		var err error
		d.c.Request.Speeds, err = ParseSpeeds(val)
		if err == nil && d.c.Request.Speeds == nil {
			err = fmt.Errorf("%w: empty: leave the field out for the site's speeds", ErrBadSpeeds)
		}
		return err
	case d.status:
		return d.statusField(key, val)
	default:
		return d.requestField(key, val)
	}
}

func (d *commentDecoder) requestField(key, val string) (err error) {
	r := &d.c.Request
	switch key {
	case "min":
		r.MinNodes, err = ParseCount(val)
	case "max":
		r.MaxNodes, err = ParseCount(val)
	case "lw":
		r.LogicalWorkers, err = ParseCount(val)
	}
	return err
}

func (d *commentDecoder) statusField(key, val string) (err error) {
	r, p := &d.c.Request, d.c.Progress
	switch key {
	case "step":
		p.Step, p.TotalSteps, err = parsePair(val, true, parseSteps)
		if err == nil && p.Step > p.TotalSteps {
			err = fmt.Errorf("step %d beyond total %d", p.Step, p.TotalSteps)
		}
	case "workers":
		p.Workers, r.LogicalWorkers, err = parsePair(val, false, ParseCount)
	case "req":
		r.MinNodes, r.MaxNodes, err = ParseRange(val)
	case "numerics":
		if val != StartOverValue {
			err = fmt.Errorf("%q: the only value the runtime writes is %s", val, StartOverValue)
		}
		p.StartsOver = true
	}
	return err
}

// parsePair parses "A/B" (or just "A" when the second half is optional).
func parsePair(s string, need bool, parse func(string) (int, error)) (a, b int, err error) {
	at, bt, has := strings.Cut(s, "/")
	if a, err = parse(at); err != nil {
		return 0, 0, err
	}
	if !has {
		if need {
			return 0, 0, errors.New("want A/B")
		}
		return a, 0, nil
	}
	b, err = parse(bt)
	return a, b, err
}

// parseSteps parses a step count, which may be zero and is bounded only by
// int64 (a count of steps, not of nodes).
func parseSteps(s string) (int, error) {
	if s == "" || len(s) > 18 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	return strconv.Atoi(s)
}

func (d *commentDecoder) finish() error {
	if d.c.Request.Determinism == "" {
		return errors.New("no determinism level (d1 or d2)")
	}
	if d.status && !(d.seen["step"] && d.seen["workers"]) {
		return errors.New("status without step= and workers=")
	}
	if !d.status && d.seen["min"] != d.seen["max"] {
		return errors.New("min= and max= must come together")
	}
	return d.c.Request.Validate()
}
