// Package slurmcli runs Slurm's client commands (squeue, sinfo, scontrol, sbatch) and
// parses what they print into typed values.
//
// The formats are chosen so that free text (job names with spaces, tabs, '|' or '=',
// very long names, comments such as "es step=1200/5000 workers=6/8 d1") cannot break
// the parsers:
//
//   - squeue and sinfo are asked for --Format (-O) fields of unlimited width ("Name:0"),
//     each followed by the ASCII unit separator 0x1F, so a record is N fields each ending
//     in 0x1F and then a newline. A newline inside a field is kept; a field that contains
//     0x1F itself is reported as a [*ParseError].
//   - scontrol show job/node -o prints Key=Value pairs with unquoted values; the parser
//     knows the keys Slurm 22.05 prints (recorded from the lab cluster) and keeps text
//     that merely looks like "key=value" inside free-text values (JobName, Comment, OS).
//   - squeue --json is not used: in 22.05 it ignores -j and -t (shared/slurm-lab/NOTES.md §4).
//
// GPU counts come from the TRES-per-node / TRES-per-job request strings
// ("gres:gpu:v100:2", "gres:gpu:3") and from sinfo's Gres/GresUsed ("gpu:t4:4",
// "gpu:v100:3(IDX:0-2)"), see [ParseGRES]: without slurmdbd the TRES field has no
// gres/gpu (NOTES.md §2).
//
// Parsers never panic on input; they return a [*ParseError] naming the source command,
// the 1-based line and the field. Golden files in testdata were recorded from Slurm
// 22.05.8 (Debian 12) with the lab cluster of tests/lab; refresh the .golden.json files
// with `go test ./internal/slurmcli -update` and the recordings with
// `go test ./internal/slurmcli -run TestRecord -record` against a running lab.
package slurmcli
