package simulator

import (
	"strings"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

// Settings is what an elastic policy ran with, echoed in the JSON
// (Result.Settings, key "settings") so that a figure can be reproduced
// from its file alone. Times are in seconds. Each key is the
// easyscale-simulate flag of the same name (DaemonDefaults: the
// easyscale-backfilld key it mirrors).
type Settings struct {
	ShrinkToAdmit bool    `json:"shrink_to_admit"`
	AdmitMaxLoss  float64 `json:"admit_max_loss"`
	// AdmitHorizon is "contested", "returned" or "kept"
	// (Config.AdmitHorizon); it applies with Objective and ShrinkToAdmit
	// only.
	AdmitHorizon string `json:"admit_horizon"`
	// AdmitAllowance is Config.AdmitAllowance (Objective and
	// ShrinkToAdmit only).
	AdmitAllowance  float64 `json:"admit_allowance"`
	Objective       bool    `json:"objective"`
	StartSmall      string  `json:"start_small"`
	WeighStartSmall bool    `json:"weigh_start_small"`
	KeepOffPinned   bool    `json:"keep_off_pinned"`
	ShedSlowNodes   bool    `json:"shed_slow_nodes"`
	MoveToFaster    bool    `json:"move_to_faster"`
	TradeUp         bool    `json:"trade_up"`
	// MoveOneTypeAfresh is Config.MoveOneTypeAfresh; left out when false.
	MoveOneTypeAfresh bool    `json:"move_one_type_afresh,omitempty"`
	MoveCost          float64 `json:"move_cost_s"`
	DrainHorizon      bool    `json:"drain_horizon"`
	RescaleCost       float64 `json:"rescale_cost_s"`
}

// settingsOf is cfg's Settings, nil under the rigid policy (none apply).
func settingsOf(cfg Config) *Settings {
	if cfg.Policy == Rigid {
		return nil
	}
	horizon := cfg.AdmitHorizon
	if horizon == "" {
		horizon = planner.HorizonReturned
	}
	return &Settings{ShrinkToAdmit: cfg.ShrinkToAdmit, AdmitMaxLoss: cfg.AdmitMaxLoss, AdmitHorizon: horizon, AdmitAllowance: cfg.AdmitAllowance,
		Objective: cfg.Objective, StartSmall: cfg.StartSmall.String(), WeighStartSmall: cfg.WeighCriticalDelay,
		KeepOffPinned: cfg.KeepOffPinned, ShedSlowNodes: cfg.ShedSlowNodes, MoveToFaster: cfg.MoveToFaster, TradeUp: cfg.TradeUp,
		MoveOneTypeAfresh: cfg.MoveOneTypeAfresh, MoveCost: cfg.MoveCost, DrainHorizon: cfg.DrainHorizon, RescaleCost: cfg.RescaleCost}
}

// elasticFlags are easyscale-simulate's flags that only elastic policies
// read.
var elasticFlags = []string{"admit-max-loss", "shrink-to-admit", "start-small", "objective", "weigh-start-small",
	"keep-off-pinned", "shed-slow-nodes", "move-to-faster", "trade-up", "move-one-type-afresh", "move-cost", "drain-horizon", "admit-horizon", "admit-allowance", "rescale-cost"}

// idleFlagsWarning names the flags given (changed reports whether a flag
// was) that do nothing under cfg, "" when none: the elastic flags under
// the rigid policy, --admit-horizon or --admit-allowance without
// --objective or without --shrink-to-admit, --move-one-type-afresh without --move-to-faster or
// --objective. A warning, not an error: one command line is often
// run under several policies.
func idleFlagsWarning(cfg Config, changed func(name string) bool) string {
	var idle []string
	if cfg.Policy == Rigid {
		for _, f := range elasticFlags {
			if changed(f) {
				idle = append(idle, "--"+f)
			}
		}
		if len(idle) == 0 {
			return ""
		}
		says := " apply to elastic policies only and do nothing here"
		if len(idle) == 1 {
			says = " applies to elastic policies only and does nothing here"
		}
		return "--policy rigid: " + strings.Join(idle, ", ") + says
	}
	for _, f := range []string{"admit-horizon", "admit-allowance"} {
		if changed(f) && !(cfg.Objective && cfg.ShrinkToAdmit) {
			off := "--shrink-to-admit=false"
			if !cfg.Objective {
				off = "--objective=false"
			}
			return "--" + f + " does nothing with " + off + ": only the objective's shrink-to-admit counts a donor's end against the horizon"
		}
	}
	if cfg.MoveOneTypeAfresh && !(cfg.MoveToFaster && cfg.Objective) {
		return "--move-one-type-afresh does nothing with --move-to-faster=false or --objective=false: it widens the moves to faster GPUs to d1 jobs"
	}
	return ""
}
