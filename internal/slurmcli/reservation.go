package slurmcli

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Reservation is one advance reservation (`scontrol create reservation`,
// https://slurm.schedmd.com/reservations.html) as `scontrol show
// reservation -o` prints it: Slurm starts no job outside it on its Nodes
// from Start to End, and none whose time limit would reach into that
// window (a maintenance window, say).
type Reservation struct {
	Name string
	// Start and End bound the window (StartTime, EndTime).
	Start, End time.Time
	// Nodes are its nodes, expanded (none: it holds licenses, cores or a
	// burst buffer only).
	Nodes []string
	// Flags are its flags (MAINT, IGNORE_JOBS, FLEX, ...), as printed.
	Flags []string
	// State is ACTIVE (Start has passed) or INACTIVE.
	State string
}

// ParseReservations parses `scontrol show reservation -o` output (one
// reservation per line; "No reservations in the system" is none), its
// times read in loc (slurmctld's zone). Errors are *ParseError naming the
// field: a reservation whose nodes or window cannot be read is an error,
// not skipped, since a caller that skipped it would place jobs onto its
// nodes.
func ParseReservations(out []byte, loc *time.Location) ([]Reservation, error) {
	recs, err := ParseScontrol(out, KindReservation)
	if err != nil {
		return nil, err
	}
	rs := make([]Reservation, 0, len(recs))
	for i, rec := range recs {
		r, err := reservationOf(rec, loc)
		if err != nil {
			err.Line = i + 1
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// reservationOf reads one record of `scontrol show reservation -o`.
func reservationOf(rec Record, loc *time.Location) (Reservation, *ParseError) {
	fail := func(field string, err error) (Reservation, *ParseError) {
		return Reservation{}, &ParseError{Source: "scontrol show reservation", Field: field, Err: err}
	}
	var r Reservation
	var ok bool
	if r.Name, ok = rec.Get("ReservationName"); !ok || r.Name == "" {
		return fail("ReservationName", fmt.Errorf("missing"))
	}
	// A name with a blank in it ("sp ace Nodes=n9", which an admin may
	// create) makes words of it read as keys of their own: a key printed
	// twice means the record cannot be read, not that its first value
	// holds. A reservation named "(null)" cannot be told, in squeue's %v,
	// from a job in none. Either way the daemon must not plan around it
	// (helper 109's).
	seen := map[string]bool{}
	for _, f := range rec {
		if seen[f.Key] {
			return fail(f.Key, fmt.Errorf("reservation %q: %s printed twice (a blank in a value, such as the name, cannot be read)", r.Name, f.Key))
		}
		seen[f.Key] = true
	}
	if r.Name == "(null)" {
		return fail("ReservationName", fmt.Errorf("a reservation named (null) cannot be told from none in squeue's output; rename it"))
	}
	start, _ := rec.Get("StartTime")
	end, _ := rec.Get("EndTime")
	var err error
	if r.Start, err = ParseTime(start, loc); err != nil {
		return fail("StartTime", fmt.Errorf("reservation %s: %w", r.Name, err))
	}
	if r.End, err = ParseTime(end, loc); err != nil {
		return fail("EndTime", fmt.Errorf("reservation %s: %w", r.Name, err))
	}
	if r.End.Before(r.Start) {
		return fail("EndTime", fmt.Errorf("reservation %s ends (%s) before it starts (%s)", r.Name, end, start))
	}
	if nodes, _ := rec.Get("Nodes"); nodes != "" && nodes != "(null)" {
		if r.Nodes, err = ExpandHostlist(nodes); err != nil {
			return fail("Nodes", fmt.Errorf("reservation %s: %w", r.Name, err))
		}
	}
	if flags, _ := rec.Get("Flags"); flags != "" && flags != "(null)" {
		r.Flags = strings.Split(flags, ",")
	}
	r.State, _ = rec.Get("State")
	return r, nil
}

// Reservations runs `scontrol show reservation -o` and parses it, times in
// loc (slurmctld's zone).
func (r Runner) Reservations(ctx context.Context, loc *time.Location) ([]Reservation, error) {
	out, err := r.Output(ctx, "scontrol", "show", "reservation", "-o")
	if err != nil {
		return nil, fmt.Errorf("showing reservations: %w", err)
	}
	return ParseReservations(out, loc)
}
