package config

import (
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// SlurmTimeUnit is the granularity of a Slurm time limit in seconds:
// sbatch --time counts whole minutes.
const SlurmTimeUnit = 60

// PlannerLimits returns the planner's limits for this configuration: the
// safety margin, min and max lend, the per-job and per-user caps, the waste
// cap and Slurm's whole-minute time limits. easyscale-backfilld plans with
// it, and easyscale-simulate with Default().PlannerLimits(), so both run one
// policy.
func (c *Config) PlannerLimits() planner.Limits {
	return planner.Limits{
		MarginSeconds:       int64(c.SafetyMargin.Seconds()),
		MinLendSeconds:      int64(c.MinLend.Seconds()),
		MaxLendSeconds:      int64(c.MaxLend.Seconds()),
		MaxExtraGPUsPerJob:  c.Limits.MaxExtraGPUsPerJob,
		MaxExtraGPUsPerUser: c.Limits.MaxExtraGPUsPerUser,
		WasteCap:            c.Limits.WasteCap,
		TimeLimitUnit:       SlurmTimeUnit,
		// Whole seconds: the hold is compared with whole-second snapshot times.
		UnplannedHoldSeconds: int64(c.UnplannedHold.Seconds()),
		RescaleSeconds:       c.RescaleCost.Seconds(),
		TradeUp:              c.TradeUp,
	}
}

// TimeLimitRule returns how start-small and shrink-to-admit raise a
// resized job's time limit (planner.RaisedTimeLimit): the remaining run
// time at the smaller size plus max(safety_margin, time_limit_margin × that
// run time), rounded up to Slurm's whole minutes.
func (c *Config) TimeLimitRule() planner.TimeLimitRule {
	return planner.TimeLimitRule{Margin: c.SafetyMargin.Duration, MarginFraction: c.TimeLimitMargin, Unit: SlurmTimeUnit * time.Second}
}
