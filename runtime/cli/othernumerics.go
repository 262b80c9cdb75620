package cli

import (
	"fmt"

	"github.com/spf13/pflag"
)

// The values of easyscale run --on-other-numerics (env
// EASYSCALE_ON_OTHER_NUMERICS): what a torch job does when its checkpoint
// was computed with other numerics than this run's
// (trainer.ErrOtherNumerics).
const (
	// onOtherNumericsRefuse fails the run and leaves the state as it was
	// (the default: the job's progress is never dropped unasked).
	onOtherNumericsRefuse = "refuse"
	// onOtherNumericsStartOver starts the job over from step 0
	// (trainer.Options.StartOverOnOtherNumerics).
	onOtherNumericsStartOver = "start-over"
)

// checkOnOtherNumerics names the flag, or its environment twin when the
// value came from there, and the values it takes.
func checkOnOtherNumerics(fs *pflag.FlagSet, v string) error {
	if v == onOtherNumericsRefuse || v == onOtherNumericsStartOver {
		return nil
	}
	from := "--on-other-numerics"
	if !fs.Changed("on-other-numerics") {
		from = "EASYSCALE_ON_OTHER_NUMERICS"
	}
	return fmt.Errorf("%s %q: want %s (fail and keep the state, the default) or %s (start the job over from step 0 "+
		"where its checkpoint was computed with other numerics)", from, v, onOtherNumericsRefuse, onOtherNumericsStartOver)
}
