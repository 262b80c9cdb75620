// Package slurmcli runs Slurm's client commands (squeue, sinfo, scontrol, sbatch) and
// parses what they print into typed values.
//
// No user-set text can forge a field or record boundary. Slurm 22.05 prints job
// names, comments and work directories verbatim, 0x1F and newlines included, so
// squeue and sinfo are asked for --Format (-O) fields of unlimited width
// ("Name:0"), each followed by a separator no user can know: [NewSeparators] draws
// a field and a record separator of 128 random bits each ("ESF…", "ESR…") for every
// call. A record is its fields joined by the field separator, then the record
// separator and a newline. squeue gets its format in SQUEUE_FORMAT2, in its
// environment, which only its owner can read (its command line is world-readable
// in /proc while it runs); sinfo has no such variable, and the node text it prints
// is set only by root and slurmd. A record with the wrong number of fields, or
// an unreadable count, is skipped and returned as a [*ParseError] naming the line,
// the job id and the field; the other records are kept (see [ParseSqueue]).
//
// Why not `squeue --json`: it would escape every string, but in 22.05 it ignores -j
// and -t (shared/slurm-lab/NOTES.md §4), so every call (also "this one job, by id",
// before a signal) would transfer every job in slurmctld's memory, and its schema
// (openapi v0.0.38 in 22.05, data_parser v0.0.39+ later) changes between releases,
// so each supported release would need its own decoder and golden files. --Format
// field names have been stable across releases, the filters run in slurmctld, and
// the random separators make the text encoding as unforgeable as JSON's quoting.
//
// scontrol show job/node -o prints Key=Value pairs with unquoted values; the parser
// knows the keys Slurm 22.05 prints (recorded from the lab cluster) and keeps text
// that merely looks like "key=value" inside free-text values (JobName, Comment, OS).
// It is not proof against hostile names (a name may hold " UserId=root(0)" or a
// newline), so no job is read from it outside tests: the backfill daemon and
// `easyscale status JOBID` read jobs from squeue ([Runner.ListJobs], [Runner.Job]
// by id). There is no Runner method for `scontrol show job`; scontrol is run
// only for nodes ([Runner.ShowNodes]), whose text only root and slurmd set.
//
// GPU counts come from the TRES-per-node / TRES-per-job request strings
// ("gres:gpu:v100:2", "gres:gpu:3") and from sinfo's Gres/GresUsed ("gpu:t4:4",
// "gpu:v100:3(IDX:0-2)"), see [ParseGRES]: without slurmdbd the TRES field has no
// gres/gpu (NOTES.md §2).
//
// The values squeue prints inside its fields have their own parsers, the only ones
// in the project: host lists ([ExpandHostlist]: NodeList, SchedNodes, ReqNodes,
// ExcNodes), times ([ParseTime]: StartTime, EndTime) and time limits
// ([ParseTimeLimit]: TimeLimit, every form of sbatch's --time). Each is fuzzed.
//
// Where Slurm releases behave differently the code decides on the behaviour:
// from 23.02 on slurmctld refuses an update that would change a running job's
// task count, which for a job submitted with --ntasks-per-node is a shrink and,
// after one, any update (its comment too), so [Runner.UpdateJob] retries such a
// refusal ([TaskCountRefusal]) with the job's NumTasks, which 22.05 never needs
// and refuses.
//
// Parsers never panic on input; they return a [*ParseError] naming the source command,
// the 1-based line, the job id or node when known, and the field. Golden files in
// testdata were recorded from Slurm 22.05.8 (Debian 12) with the lab cluster of
// tests/lab, including hostile jobs of the user nobody (names and comments with 0x1F
// and newlines, a name forging a whole record); testdata/separators.txt holds the
// separators the squeue and sinfo recordings were made with; testdata/slurm-24.11
// holds the same recordings from Slurm 24.11.5 (Debian 13, the current lab), whose
// README lists what 24.11 prints differently. Refresh the
// .golden.json files with `go test ./internal/slurmcli -update` and the recordings
// with `go test ./internal/slurmcli -run TestRecord -record` (as root) against a
// running lab; -record-scontrol=false keeps the scontrol recordings.
package slurmcli
