package gpuctx

import "github.com/easyscale/easyscale-slurm/internal/gpuspeed"

// SpeedTable maps a model key to its speed relative to a V100 (1.0); see
// gpuspeed.Table, the project's one table.
type SpeedTable = gpuspeed.Table

// SpeedError reports a bad entry of a speed list (gpuspeed.Error).
type SpeedError = gpuspeed.Error

// DefaultSpeeds is the built-in table, gpuspeed.Default.
var DefaultSpeeds = gpuspeed.Default

// UnknownSpeed is reported for a model no key matches.
const UnknownSpeed = gpuspeed.UnknownSpeed

// ParseSpeeds parses "MODEL=SPEED[,MODEL=SPEED…]" (gpuspeed.Parse).
func ParseSpeeds(s string) (SpeedTable, error) { return gpuspeed.Parse(s) }
