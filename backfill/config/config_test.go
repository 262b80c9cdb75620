package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/planner"
)

func TestEmptyFileGivesTheDocumentedDefaults(t *testing.T) {
	c, err := Parse("")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"poll_interval", c.PollInterval.Duration, 10 * time.Second},
		{"max_backoff", c.MaxBackoff.Duration, 5 * time.Minute},
		{"safety_margin", c.SafetyMargin.Duration, 60 * time.Second},
		{"time_limit_margin", c.TimeLimitMargin, 0.1},
		{"grace_period", c.GracePeriod.Duration, 30 * time.Second},
		{"min_lend", c.MinLend.Duration, 2 * time.Minute},
		{"max_lend", c.MaxLend.Duration, time.Hour},
		{"pending_timeout", c.PendingTimeout.Duration, 30 * time.Second},
		{"state_db", c.StateDB, "/var/lib/easyscale/backfill.db"},
		{"metrics_address", c.MetricsAddress, "127.0.0.1:9478"},
		{"extra.partition", c.Extra.Partition, "low"},
		{"extra.worker_command", c.Extra.WorkerCommand, DefaultWorkerCommand},
		{"limits.waste_cap", c.Limits.WasteCap, 0.30},
		{"admit.enabled", c.Admit.Enabled, true},
		{"admit.max_loss", c.Admit.MaxLoss, 0.5},
		{"admit.rule", c.Admit.Rule, "objective"},
		{"admit.horizon", c.Admit.Horizon, "returned"},
		{"admit.allowance", c.Admit.Allowance, 0.75},
		{"rescale_cost", c.RescaleCost.Duration, 30 * time.Second},
		{"unplanned_hold", c.UnplannedHold.Duration, 60 * time.Second},
		{"nudge_eligible", c.NudgeEligible, true},
		{"start_small.rule", c.StartSmall.Rule, "ends-earlier"},
		{"start-small acts in every partition by default", c.StartSmallOn("normal"), true},
		{"log.level", c.Log.Level, "info"},
		{"speeds.v100", c.Speeds["v100"], 1.0},
		{"speeds.t4", c.Speeds["t4"], 0.52},
		{"speeds.a100", c.Speeds["a100"], 1.24},
		{"dry_run", c.DryRun, false},
		{"retry.base", c.Retry.Base.Duration, time.Minute},
		{"retry.max", c.Retry.Max.Duration, time.Hour},
		{"retry.stop_after", c.Retry.StopAfter, 5},
		{"retention.decisions", c.Retention.Decisions, 10000},
		{"retention.ended_extras", c.Retention.EndedExtras, 1000},
		{"retention.max_age", c.Retention.MaxAge.Duration, 7 * 24 * time.Hour},
		{"the retry rule", c.RetryPolicy(), planner.RetryPolicy{BaseSeconds: 60, MaxSeconds: 3600, StopAfter: 5}},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if d := Default(); d.PollInterval != c.PollInterval || d.Extra != c.Extra || d.Limits != c.Limits {
		t.Errorf("Default() = %+v, want what an empty file gives", d)
	}
}

func TestSpeedsOverrideTheDefaultsPerType(t *testing.T) {
	c, err := Parse("[speeds]\nt4 = 0.5\nmi250 = 1.8\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Speeds["t4"] != 0.5 || c.Speeds["mi250"] != 1.8 || c.Speeds["v100"] != 1.0 {
		t.Errorf("speeds %v: want t4 0.5, mi250 1.8 and the default v100 1.0", c.Speeds)
	}
	if DefaultSpeeds["t4"] != 0.52 {
		t.Errorf("parsing changed DefaultSpeeds: %v", DefaultSpeeds)
	}
}

func TestBadConfigIsRefusedWithTheKeyAndTheFix(t *testing.T) {
	tests := []struct {
		name, toml string
		key, fix   string // both must appear in the error
	}{
		{"a zero poll interval is refused", `poll_interval = "0s"`, "poll_interval", "between 1s and 1h0m0s"},
		{"a poll interval that is not a duration is refused", `poll_interval = "often"`, "poll_interval", `like "30s"`},
		{"a poll interval written as a number is refused", `poll_interval = 10`, "poll_interval", ""},
		{"a negative safety margin is refused", `safety_margin = "-1s"`, "safety_margin", "between 0s"},
		{"a grace period over 30 minutes is refused", `grace_period = "1h"`, "grace_period", "between 1s and 30m0s"},
		{"a minimum lend under one minute is refused", `min_lend = "30s"`, "min_lend", "between 1m0s"},
		{"a maximum lend below the minimum is refused", "min_lend = \"10m\"\nmax_lend = \"5m\"", "max_lend", "at least min_lend"},
		{"a backoff cap below the poll interval is refused", "poll_interval = \"1m\"\nmax_backoff = \"10s\"", "max_backoff", "at least poll_interval"},
		{"a zero speed is refused", "[speeds]\nv100 = 0.0", "speeds.v100", "> 0"},
		{"a negative speed is refused", "[speeds]\nt4 = -1.0", "speeds.t4", "> 0"},
		{"a lendable GPU type without a speed is refused", `gpu_types = ["tpu9"]`, "gpu_types", "add it under [speeds]"},
		{"a duplicate partition is refused", `partitions = ["normal", "normal"]`, "partitions", "listed twice"},
		{"a partition name with a space is refused", `partitions = ["my part"]`, "partitions", "not a Slurm name"},
		{"a node name with a slash is refused", `nodes = ["n1/2"]`, "nodes", "not a Slurm name"},
		{"an empty extra partition is refused", "[extra]\npartition = \"\"", "extra.partition", "not a Slurm partition name"},
		{"a QOS with a comma is refused", "[extra]\nqos = \"a,b\"", "extra.qos", "not a Slurm QOS name"},
		{"an unknown placeholder in the worker command is refused", "[extra]\nworker_command = \"srun w {jobid}\"", "extra.worker_command", "unknown placeholder"},
		{"a blank worker command is refused", "[extra]\nworker_command = \"  \"", "extra.worker_command", "must not be blank"},
		{"a worker command without srun is refused (one worker would idle the other GPUs)",
			"[extra]\nworker_command = \"easyscale worker --join x\"", "extra.worker_command", "must start the worker with srun"},
		{"a command that only names srunner is refused", "[extra]\nworker_command = \"srunner w\"", "extra.worker_command", "with srun"},
		{"a negative per-job cap is refused", "[limits]\nmax_extra_gpus_per_job = -1", "limits.max_extra_gpus_per_job", "≥ 0"},
		{"a negative per-user cap is refused", "[limits]\nmax_extra_gpus_per_user = -2", "limits.max_extra_gpus_per_user", "≥ 0"},
		{"a waste cap of 1 is refused", "[limits]\nwaste_cap = 1.0", "limits.waste_cap", "(0, 1)"},
		{"an explicit zero waste cap is refused", "[limits]\nwaste_cap = 0.0", "limits.waste_cap", "(0, 1)"},
		{"a negative time-limit margin is refused", "time_limit_margin = -0.1", "time_limit_margin", "[0, 1]"},
		{"a time-limit margin above 1 is refused", "time_limit_margin = 2.0", "time_limit_margin", "[0, 1]"},
		{"a zero admit cap is refused", "[admit]\nmax_loss = 0.0", "admit.max_loss", "(0, 1]"},
		{"an admit cap above 1 is refused", "[admit]\nmax_loss = 1.5", "admit.max_loss", "(0, 1]"},
		{"an unknown admit rule is refused", "[admit]\nrule = \"fastest\"", "admit.rule", "longest-left"},
		{"a negative admit allowance is refused", "[admit]\nallowance = -0.1", "admit.allowance", "[0, 10]"},
		{"an admit allowance above 10 is refused", "[admit]\nallowance = 11.0", "admit.allowance", "[0, 10]"},
		{"an unknown admit horizon is refused", "[admit]\nhorizon = \"never\"", "admit.horizon", `"contested", "returned" or "kept"`},
		{"an empty admit horizon is refused", "[admit]\nhorizon = \"\"", "admit.horizon", `"contested", "returned" or "kept"`},
		{"a negative rescale cost is refused", "rescale_cost = \"-1s\"", "rescale_cost", "between 0s and 1h"},
		{"an unplanned hold over an hour is refused", "unplanned_hold = \"2h\"", "unplanned_hold", "between 0s and 1h"},
		{"an off partition that is no Slurm name is refused", "[admit]\noff_partitions = [\"a b\"]", "admit.off_partitions", "not a Slurm name"},
		{"an unknown start-small rule is refused", "[start_small]\nrule = \"always\"", "start_small.rule", "off, before-reservation or ends-earlier"},
		{"a start-small partition that is no Slurm name is refused", "[start_small]\nrule = \"before-reservation\"\npartitions = [\"a;b\"]", "start_small.partitions", "not a Slurm name"},
		{"a zero retry wait is refused", "[retry]\nbase = \"0s\"", "retry.base", "between 1s and 24h0m0s"},
		{"a retry wait that is not a duration is refused", "[retry]\nbase = \"soon\"", "retry.base", `like "30s"`},
		{"a retry cap below the first wait is refused", "[retry]\nbase = \"10m\"\nmax = \"5m\"", "retry.max", "between retry.base (10m0s)"},
		{"a retry cap over a day is refused", "[retry]\nmax = \"48h\"", "retry.max", "and 24h0m0s"},
		{"a negative stop count is refused", "[retry]\nstop_after = -1", "retry.stop_after", "between 0 (never stop) and 1000"},
		{"fewer than 100 kept decisions are refused", "[retention]\ndecisions = 10", "retention.decisions", "between 100 and 10000000"},
		{"a zero count of kept extra jobs is refused", "[retention]\nended_extras = 0", "retention.ended_extras", "between 100 and 10000000"},
		{"a retention age under an hour is refused", "[retention]\nmax_age = \"10m\"", "retention.max_age", "between 1h0m0s and 8760h0m0s"},
		{"a retry key at the top level says it belongs under [retry]", "stop_after = 3", "stop_after",
			"stop_after (it belongs under [retry]: retry.stop_after)"},
		{"an unknown log level is refused", "[log]\nlevel = \"loud\"", "log.level", "one of trace"},
		{"a metrics address without a port is refused", `metrics_address = "localhost"`, "metrics_address", "HOST:PORT"},
		{"a relative state database path is refused", `state_db = "backfill.db"`, "state_db", "absolute path"},
		{"an unknown top-level key is refused by name", `poll_intervall = "5s"`, "poll_intervall", "remove or rename"},
		{"a misspelt top-level key names the key meant", `poll_intervall = "5s"`, "poll_intervall", "(did you mean poll_interval?)"},
		{"an unknown key in a table is refused by name", "[extra]\npartiton = \"low\"", "extra.partiton", "remove or rename"},
		{"a misspelt key in a table names the key meant", "[extra]\npartiton = \"low\"", "extra.partiton", "(did you mean extra.partition?)"},
		{"a key far from any is not guessed", "[extra]\nzz = 1", "extra.zz", "extra.zz: remove"},
		{"max_backoff below a set poll_interval says how to fix either", `poll_interval = "10m"`, "max_backoff",
			"5m when not set: set it to 10m0s or more, or lower poll_interval"},
		{"a limits key at the top level says it belongs under [limits]", "waste_cap = 1.5", "waste_cap",
			"waste_cap (it belongs under [limits]: limits.waste_cap)"},
		{"an extra key in [limits] says it belongs under [extra]", "[limits]\nqos = \"x\"", "limits.qos",
			"limits.qos (it belongs under [extra]: extra.qos)"},
		{"a top-level key below a table header says to move it up", "[log]\nlevel = \"info\"\npoll_interval = \"5s\"",
			"log.poll_interval", "log.poll_interval (it is a top-level key: write poll_interval above the first [table] header)"},
		{"a key known nowhere gets no place, only the nearest name", "[limits]\nwastecap = 0.3", "limits.wastecap", "limits.wastecap (did you mean limits.waste_cap?): remove or rename"},
		{"broken TOML is refused", `poll_interval = `, "parsing TOML", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.toml)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded", tc.toml)
			}
			if !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.fix) {
				t.Fatalf("error %q does not name %q with the fix %q", err, tc.key, tc.fix)
			}
		})
	}
}

func TestEveryProblemIsReportedAtOnceAsFieldErrors(t *testing.T) {
	_, err := Parse("poll_interval = \"0s\"\n[limits]\nwaste_cap = 2.0\n[log]\nlevel = \"x\"\n")
	var keys []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a *FieldError", e)
		}
		keys = append(keys, fe.Key)
	}
	if got := strings.Join(keys, ","); got != "poll_interval,limits.waste_cap,log.level" {
		t.Errorf("reported keys %s, want poll_interval, limits.waste_cap and log.level", got)
	}
}

func TestUnknownKeysWrapErrUnknownKeysAndAreAllListed(t *testing.T) {
	_, err := Parse("foo = 1\n[extra]\nbar = 2\n")
	if !errors.Is(err, ErrUnknownKeys) {
		t.Fatalf("error %v does not wrap ErrUnknownKeys", err)
	}
	if !strings.Contains(err.Error(), "extra.bar, foo") {
		t.Errorf("error %q does not list extra.bar and foo", err)
	}
}

func TestExplicitValuesAreKept(t *testing.T) {
	c, err := Parse(`
poll_interval = "2s"
safety_margin = "0s"
metrics_address = "off"
dry_run = true
partitions = ["normal", "gpu"]
nodes = ["n1", "n2"]
gpu_types = ["v100"]
[extra]
partition = "scavenger"
qos = "low"
worker_command = "srun sleep 600 # {job_id} {rendezvous}"
[limits]
max_extra_gpus_per_job = 4
max_extra_gpus_per_user = 8
waste_cap = 0.2
[retry]
base = "30s"
max = "2h"
stop_after = 0
[retention]
decisions = 500
ended_extras = 200
max_age = "24h"
[log]
level = "debug"
json = true
`)
	if err != nil {
		t.Fatal(err)
	}
	if c.PollInterval.Duration != 2*time.Second || c.SafetyMargin.Duration != 0 || c.MetricsEnabled() || !c.DryRun ||
		c.Extra.Partition != "scavenger" || c.Extra.QOS != "low" || c.Limits.MaxExtraGPUsPerJob != 4 ||
		c.Limits.MaxExtraGPUsPerUser != 8 || c.Limits.WasteCap != 0.2 || c.Log.Level != "debug" || !c.Log.JSON ||
		len(c.Nodes) != 2 || len(c.Partitions) != 2 || c.GPUTypes[0] != "v100" {
		t.Errorf("explicit values not kept: %+v", c)
	}
	if want := (planner.RetryPolicy{BaseSeconds: 30, MaxSeconds: 7200, StopAfter: 0}); c.RetryPolicy() != want {
		t.Errorf("retry rule %+v, want %+v (an explicit stop_after = 0: never stop)", c.RetryPolicy(), want)
	}
	if c.Retention != (Retention{Decisions: 500, EndedExtras: 200, MaxAge: Duration{24 * time.Hour}}) {
		t.Errorf("retention %+v not kept", c.Retention)
	}
}

// A setting that does nothing with the others is a warning, not an error:
// the shipped example sets admit.horizon, and an admin who switches its
// rule to longest-left must still be able to start the daemon.
func TestWarningsNameSettingsThatDoNothing(t *testing.T) {
	for _, tc := range []struct {
		name, toml, want string
	}{
		{"defaults", "", ""},
		{"the horizon with the objective", "[admit]\nhorizon = \"kept\"", ""},
		{"the longest-left rule alone", "[admit]\nrule = \"longest-left\"", ""},
		{"the horizon with the longest-left rule", "[admit]\nrule = \"longest-left\"\nhorizon = \"kept\"",
			`admit.horizon = "kept" does nothing: admit.rule = "longest-left" weighs no horizon`},
		{"the horizon with shrink-to-admit off (whatever the rule)", "[admit]\nenabled = false\nrule = \"longest-left\"\nhorizon = \"returned\"",
			"admit.rule does nothing: shrink-to-admit is off (admit.enabled = false)\nadmit.horizon does nothing: shrink-to-admit is off (admit.enabled = false)"},
		// A tester's: --check-config named only admit.horizon.
		// off_partitions keeps shedding and moves off those partitions
		// too: never said to do nothing (a second tester's finding).
		{"max_loss and off_partitions with shrink-to-admit off", "[admit]\nenabled = false\nmax_loss = 0.3\noff_partitions = [\"gpu\"]",
			"admit.max_loss does nothing: shrink-to-admit is off (admit.enabled = false)"},
		{"the allowance with the longest-left rule", "[admit]\nrule = \"longest-left\"\nallowance = 1.0",
			`admit.allowance = 1 does nothing: admit.rule = "longest-left" weighs no horizon`},
		{"the allowance with shrink-to-admit off", "[admit]\nenabled = false\nallowance = 0.0",
			"admit.allowance does nothing: shrink-to-admit is off (admit.enabled = false)"},
		{"the allowance with the objective", "[admit]\nallowance = 0.0", ""},
		{"move_cost with move_to_faster off", "move_to_faster = false\nmove_cost = \"300s\"", "move_cost does nothing: move_to_faster = false"},
		{"move_cost with move_to_faster on", "move_cost = \"300s\"", ""},
		{"start_small.partitions with the rule off", "[start_small]\nrule = \"off\"\npartitions = [\"normal\"]",
			`start_small.partitions does nothing: start_small.rule = "off"`},
		{"start_small.partitions with a rule", "[start_small]\npartitions = [\"normal\"]", ""},
		// helper 98's: both spellings passed without a word
		{"two speeds whose GPU types differ only in case", "[speeds]\nV100 = 3.1\nv100 = 3.0\nt4 = 1", "speeds.V100 and speeds.v100 differ only in case"},
		{"a speed in another case than the default's is not warned of here", "[speeds]\nV100 = 3.1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.toml)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(c.Warnings(), "\n")
			// One warning per line, each starting as wanted.
			if got != tc.want && (tc.want == "" || !strings.HasPrefix(got, tc.want) || strings.Count(got, "\n") != strings.Count(tc.want, "\n")) {
				t.Errorf("Warnings() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTheShippedExampleConfigLoads(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "contrib", "backfill.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Warnings(); len(w) > 0 {
		t.Errorf("the example warns: %q", w)
	}
	if c.Extra.WorkerCommand != DefaultWorkerCommand {
		t.Errorf("example worker_command %q differs from the default %q", c.Extra.WorkerCommand, DefaultWorkerCommand)
	}
	// The file says its values are the defaults: its speeds must be the table's.
	for typ, speed := range c.Speeds {
		if DefaultSpeeds[typ] != speed {
			t.Errorf("example speeds.%s = %v, the default is %v", typ, speed, DefaultSpeeds[typ])
		}
	}
	if d := Default(); c.Retry != d.Retry || c.Retention != d.Retention {
		t.Errorf("example [retry] %+v and [retention] %+v, the defaults are %+v and %+v", c.Retry, c.Retention, d.Retry, d.Retention)
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backfill.toml")
	if err := os.WriteFile(path, []byte(`poll_interval = "0s"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Load error %v does not name %s", err, path)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.toml")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

func FuzzParse(f *testing.F) {
	example, _ := os.ReadFile(filepath.Join("..", "..", "contrib", "backfill.toml"))
	f.Add(string(example))
	f.Add("poll_interval = \"1s\"\n[speeds]\nv100 = 1e309\n")
	f.Add("[extra]\nworker_command = \"{x}{token_file}\"")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := Parse(text)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that Validate refuses: %v", err)
		}
		if c.PollInterval.Duration < time.Second || c.Limits.WasteCap <= 0 || c.Limits.WasteCap >= 1 {
			t.Fatalf("accepted out-of-range values: %+v", c)
		}
	})
}

func TestStartSmallActsInTheListedPartitionsOnly(t *testing.T) {
	cases := []struct {
		toml      string
		partition string
		want      bool
	}{
		{"[start_small]\nrule = \"before-reservation\"\n", "normal", true},
		{"[start_small]\nrule = \"ends-earlier\"\npartitions = [\"gpu\"]\n", "gpu", true},
		{"[start_small]\nrule = \"ends-earlier\"\npartitions = [\"gpu\"]\n", "normal", false},
		{"[start_small]\nrule = \"off\"\npartitions = [\"gpu\"]\n", "gpu", false},
		{"[start_small]\nrule = \"ends-earlier\"\npartitions = [\"gpu\", \"normal\"]\n", "gpu,normal", true},
		{"[start_small]\nrule = \"ends-earlier\"\npartitions = [\"gpu\"]\n", "gpu,normal", false},
	}
	for _, tc := range cases {
		c, err := Parse(tc.toml)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.StartSmallOn(tc.partition); got != tc.want {
			t.Errorf("%q in partition %s: StartSmallOn %v, want %v", tc.toml, tc.partition, got, tc.want)
		}
	}
}

func TestAdmitIsOffForAJobQueuedInSeveralPartitionsWhenOneIsOff(t *testing.T) {
	c, err := Parse("[admit]\noff_partitions = [\"gpu\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"normal": true, "gpu": false, "debug,gpu": false, "gpu,debug": false, "debug,normal": true} {
		if got := c.AdmitOn(p); got != want {
			t.Errorf("AdmitOn(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestTheTimeLimitRuleIsTheSafetyMarginAndTheTimeLimitMargin(t *testing.T) {
	c, err := Parse("safety_margin = \"90s\"\ntime_limit_margin = 0.0\n")
	if err != nil {
		t.Fatal(err)
	}
	want := planner.TimeLimitRule{Margin: 90 * time.Second, MarginFraction: 0, Unit: time.Minute}
	if got := c.TimeLimitRule(); got != want {
		t.Errorf("TimeLimitRule() = %+v with an explicit zero time_limit_margin, want %+v", got, want)
	}
	if got := Default().TimeLimitRule(); got.MarginFraction != 0.1 || got.Margin != time.Minute {
		t.Errorf("default TimeLimitRule() = %+v, want 10 %% and at least 60 s", got)
	}
}

// A value of the wrong TOML type is refused as a *FieldError naming the
// key and showing how the setting is written (a tester met the decoder's
// "destination has type slice" and had to guess the fix).
func TestAValueOfTheWrongTypeSaysHowTheSettingIsWritten(t *testing.T) {
	for _, c := range []struct{ text, key, fix string }{
		{"partitions = \"normal\"\n", "partitions", `partitions = ["a", "b"]`},
		{"[speeds]\nv100 = \"fast\"\n", "speeds.v100", "v100 = 3.1"},
		{"shed_slow_nodes = \"yes\"\n", "shed_slow_nodes", "shed_slow_nodes = true"},
		{"[extra]\npartition = 3\n", "extra.partition", `partition = "value"`},
		{"partitions = [1, 2]\n", "partitions", `partitions = ["a", "b"]`},
	} {
		t.Run(c.key, func(t *testing.T) {
			_, err := Parse(c.text)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse(%q) = %v, want a *FieldError", c.text, err)
			}
			if fe.Key != c.key || !strings.Contains(fe.Fix, c.fix) {
				t.Errorf("FieldError key %q fix %q, want key %q and a fix showing %s", fe.Key, fe.Fix, c.key, c.fix)
			}
		})
	}
}
