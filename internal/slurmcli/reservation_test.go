package slurmcli

import (
	"errors"
	"testing"
	"time"
)

func TestParseReservationsRefusesWhatItCannotRead(t *testing.T) {
	const ok = "ReservationName=m StartTime=2026-12-07T06:00:00 EndTime=2026-12-07T06:30:00 Duration=00:30:00 Nodes=n[1-2] NodeCnt=2 Flags=MAINT State=INACTIVE"
	tests := []struct {
		name, line, field string
	}{
		{"no name", "StartTime=2026-12-07T06:00:00 EndTime=2026-12-07T06:30:00 Nodes=n1", "ReservationName"},
		{"a start that is no time", "ReservationName=m StartTime=soon EndTime=2026-12-07T06:30:00 Nodes=n1", "StartTime"},
		{"no end", "ReservationName=m StartTime=2026-12-07T06:00:00 Nodes=n1", "EndTime"},
		{"an end before the start", "ReservationName=m StartTime=2026-12-07T06:00:00 EndTime=2026-12-07T05:00:00 Nodes=n1", "EndTime"},
		{"a node list that does not expand", "ReservationName=m StartTime=2026-12-07T06:00:00 EndTime=2026-12-07T06:30:00 Nodes=n[2-1]", "Nodes"},
		// helper 109's, from the 22.05 lab: scontrol create reservation
		// 'ReservationName=sp ace Nodes=n9' ... Nodes=n2
		{"a name with a blank that reads as a key", "ReservationName=sp ace Nodes=n9 StartTime=2026-12-07T06:00:00 EndTime=2026-12-07T06:30:00 Nodes=n2", "Nodes"},
		{"a reservation named (null)", "ReservationName=(null) StartTime=2026-12-07T06:00:00 EndTime=2026-12-07T06:30:00 Nodes=n2", "ReservationName"},
	}
	for _, tc := range tests {
		_, err := ParseReservations([]byte(ok+"\n"+tc.line+"\n"), time.UTC)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Field != tc.field || pe.Line != 2 {
			t.Errorf("%s: err %v, want a ParseError on line 2, field %s", tc.name, err, tc.field)
		}
	}
	rs, err := ParseReservations([]byte(ok+"\nReservationName=lic StartTime=2026-12-07T06:00:00 EndTime=2026-12-07T06:30:00 Nodes=(null) Flags=(null)\n"), time.UTC)
	if err != nil || len(rs) != 2 || len(rs[0].Nodes) != 2 || rs[1].Nodes != nil || rs[1].Flags != nil {
		t.Errorf("ParseReservations = %+v, %v; want n1 and n2 reserved by m, no node by lic", rs, err)
	}
}
