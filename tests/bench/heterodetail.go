package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/easyscale/easyscale-slurm/backfill/simulator"
	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

func init() { register("hetero-detail", heteroDetailSuite) }

// heteroCell names one cell of the hetero matrix: a case, a d1 share and
// a job range.
type heteroCell struct {
	name  string
	d1    float64
	paper bool
	file  bool // name is a job table's path (traceDetail)
}

// parseHeteroCells parses $EASYSCALE_HETERO_CELLS: comma-separated
// NAME:D1:RANGE, e.g. "pollux8@64:0:paper,pollux6@64:0.4:default" (D1 a
// fraction, RANGE paper or default).
func parseHeteroCells(s string) ([]heteroCell, error) {
	var out []heteroCell
	for _, f := range strings.Split(s, ",") {
		p := strings.Split(strings.TrimSpace(f), ":")
		if len(p) != 3 || (p[2] != "paper" && p[2] != "default") {
			return nil, fmt.Errorf("hetero cell %q: want NAME:D1:paper|default", f)
		}
		d1, err := strconv.ParseFloat(p[1], 64)
		if err != nil || d1 < 0 || d1 > 1 {
			return nil, fmt.Errorf("hetero cell %q: d1 share %q is not a fraction in [0, 1]", f, p[1])
		}
		out = append(out, heteroCell{name: p[0], d1: d1, paper: p[2] == "paper"})
	}
	return out, nil
}

// parseWindow parses $EASYSCALE_HETERO_WINDOW, "FROM-TO" in trace
// seconds; ok is false when s is empty.
func parseWindow(s string) (from, to int64, ok bool, err error) {
	if s == "" {
		return 0, 0, false, nil
	}
	a, b, found := strings.Cut(s, "-")
	from, err1 := strconv.ParseInt(a, 10, 64)
	to, err2 := strconv.ParseInt(b, 10, 64)
	if !found || err1 != nil || err2 != nil || to < from {
		return 0, 0, false, fmt.Errorf("EASYSCALE_HETERO_WINDOW %q: want FROM-TO, seconds", s)
	}
	return from, to, true, nil
}

// heteroDetailSuite explains hetero cells: for each cell of
// $EASYSCALE_HETERO_CELLS it runs rigid and elastic (the daemon's
// default) and prints, to stdout, the elastic run's admissions, small
// starts and grows, the jobs that end last under elastic next to their
// rigid records (start, end, GPU types, rescales: was the last job
// shrunk, started small, grown late or placed on a slow type?) and
// rigid's last jobs; with $EASYSCALE_HETERO_WINDOW=FROM-TO, every job
// of both runs that runs in that window. It prints no figures and does
// nothing when $EASYSCALE_HETERO_CELLS is unset (so `make bench` skips
// it).
//
// With $EASYSCALE_DETAIL_TRACE=FILE[,FILE...] it does the same for each
// job table on the issue's cluster instead (issueCase: 32 V100, 16 P100
// and 16 T4 in nodes of 8, site speeds 3.1 / 2.4 / 1, what
// `easyscale-simulate --gpus v100:32,p100:16,t4:16 --gpus-per-node 8
// --speeds v100:3.1,p100:2.4,t4:1` runs), the trace's own columns saying
// each job's range, determinism and type.
//
// $EASYSCALE_DETAIL_POLICY=legacy (or any policy heteroConfig knows) runs
// that policy in the elastic run's place, to read where it differs.
func heteroDetailSuite() ([]figure, error) {
	from, to, window, err := parseWindow(os.Getenv("EASYSCALE_HETERO_WINDOW"))
	if err != nil {
		return nil, err
	}
	if files := os.Getenv("EASYSCALE_DETAIL_TRACE"); files != "" {
		return nil, traceDetail(strings.Split(files, ","), from, to, window)
	}
	spec := os.Getenv("EASYSCALE_HETERO_CELLS")
	if spec == "" {
		return nil, nil
	}
	cells, err := parseHeteroCells(spec)
	if err != nil {
		return nil, err
	}
	cases, err := heteroCases()
	if err != nil {
		return nil, err
	}
	for _, cell := range cells {
		i := slices.IndexFunc(cases, func(c heteroCase) bool { return c.name == cell.name })
		if i < 0 {
			return nil, fmt.Errorf("hetero cell %s: no such case", cell.name)
		}
		c := cases[i]
		jobs := heteroJobs(c.jobs, c.groups, cell.d1, cell.paper)
		res := map[string]simulator.Result{}
		for _, p := range []string{"rigid", "elastic"} {
			pol := p
			if v := os.Getenv("EASYSCALE_DETAIL_POLICY"); v != "" && p == "elastic" {
				pol = v
			}
			r, err := simulator.Run(jobs, heteroConfig(c, pol))
			if err != nil {
				return nil, fmt.Errorf("hetero cell %s d1=%v %s: %w", cell.name, cell.d1, p, err)
			}
			res[p] = r
		}
		printCellDetail(os.Stdout, cell, res["rigid"], res["elastic"])
		if window {
			for _, p := range []string{"elastic", "rigid"} {
				printWindow(os.Stdout, p, res[p].PerJob, from, to)
			}
		}
	}
	return nil, nil
}

// issueCase is the cluster of issue 17's example: 32 V100, 16 P100 and
// 16 T4 in nodes of 8.
func issueCase(name string, jobs []trace.Job) heteroCase {
	return heteroCase{name, jobs, []simulator.GPUGroup{{Type: "v100", Count: 32}, {Type: "p100", Count: 16}, {Type: "t4", Count: 16}}, 8}
}

// issueSpeeds are issue 17's per-type speeds, 3.1 / 2.4 / 1.
var issueSpeeds = map[string]float64{"v100": 3.1, "p100": 2.4, "t4": 1}

// traceDetail is heteroDetailSuite for job tables on issueCase's cluster.
func traceDetail(files []string, from, to int64, window bool) error {
	for _, f := range files {
		jobs, err := trace.ReadFile(f)
		if err != nil {
			return err
		}
		c := issueCase(f, jobs)
		res := map[string]simulator.Result{}
		for _, p := range []string{"rigid", "elastic"} {
			cfg := heteroConfig(c, p)
			cfg.Speeds = issueSpeeds
			r, err := simulator.Run(jobs, cfg)
			if err != nil {
				return fmt.Errorf("%s %s: %w", f, p, err)
			}
			res[p] = r
		}
		printCellDetail(os.Stdout, heteroCell{name: f, file: true}, res["rigid"], res["elastic"])
		if window {
			for _, p := range []string{"elastic", "rigid"} {
				printWindow(os.Stdout, p, res[p].PerJob, from, to)
			}
		}
	}
	return nil
}

func byEndDesc(a, b simulator.JobRecord) int { return cmp.Compare(b.End, a.End) }

// printCellDetail writes one cell's summary and its last jobs.
func printCellDetail(w io.Writer, cell heteroCell, rigid, elastic simulator.Result) {
	label := fmt.Sprintf("%s d1 %.0f %% default", cell.name, 100*cell.d1)
	if cell.paper {
		label = fmt.Sprintf("%s d1 %.0f %% paper", cell.name, 100*cell.d1)
	}
	if cell.file {
		label = cell.name
	}
	fmt.Fprintf(w, "== %s: rigid mean JCT %.0f s makespan %d s | elastic %.0f s (%.3f) makespan %d s (%.3f); "+
		"elastic admissions %d, small starts %d, grows %d\n", label, rigid.MeanJCT, rigid.Makespan,
		elastic.MeanJCT, elastic.MeanJCT/rigid.MeanJCT, elastic.Makespan, float64(elastic.Makespan)/float64(rigid.Makespan),
		elastic.AdmitShrinks, elastic.SmallStarts, elastic.Grows)
	rigidByID := make(map[string]simulator.JobRecord, len(rigid.PerJob))
	for _, r := range rigid.PerJob {
		rigidByID[r.ID] = r
	}
	fmt.Fprintln(w, "  last under elastic: id submit duration request | elastic start end GPUs at start/base at end/peak, start types, rescales | rigid start end types")
	el := slices.SortedFunc(slices.Values(elastic.PerJob), byEndDesc)
	for _, r := range el[:min(4, len(el))] {
		q := rigidByID[r.ID]
		fmt.Fprintf(w, "  %-14s %7d %6d %2d | %7d %7d %2d/%2d/%2d %-14s %2d | %7d %7d %s\n", r.ID, r.Submit, r.Duration, r.Request,
			r.Start, r.End, r.StartGPUs, r.EndBaseGPUs, r.PeakGPUs, r.StartTypes, r.Rescales, q.Start, q.End, q.StartTypes)
	}
	rl := slices.SortedFunc(slices.Values(rigid.PerJob), byEndDesc)
	for _, r := range rl[:min(2, len(rl))] {
		fmt.Fprintf(w, "  last under rigid: %s submit %d start %d end %d request %d on %s\n", r.ID, r.Submit, r.Start, r.End, r.Request, r.StartTypes)
	}
}

// printWindow writes policy's jobs that run during [from, to), by start.
func printWindow(w io.Writer, policy string, recs []simulator.JobRecord, from, to int64) {
	recs = slices.SortedFunc(slices.Values(recs), func(a, b simulator.JobRecord) int { return cmp.Compare(a.Start, b.Start) })
	for _, r := range recs {
		if r.End > from && r.Start < to {
			fmt.Fprintf(w, "   %s %-14s submit %7d start %7d end %7d duration %6d request %2d GPUs %2d/%2d/%2d %-14s rescales %d\n", policy,
				r.ID, r.Submit, r.Start, r.End, r.Duration, r.Request, r.StartGPUs, r.EndBaseGPUs, r.PeakGPUs, r.StartTypes, r.Rescales)
		}
	}
}
