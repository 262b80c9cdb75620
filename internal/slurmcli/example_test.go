package slurmcli_test

import (
	"fmt"
	"strings"

	"github.com/easyscale/easyscale-slurm/internal/slurmcli"
)

// GPU counts come from the TRES-per-node or TRES-per-job request, not from TRES.
func ExampleParseGRES() {
	perNode, _ := slurmcli.ParseGRES("gres:gpu:v100:2")
	used, _ := slurmcli.ParseGRES("gpu:t4:3(IDX:0-2)")
	tres, _ := slurmcli.ParseGRES("cpu=4,node=2,billing=4,gres/gpu=4")
	fmt.Println(slurmcli.GPUs(perNode), used[0].Type, used[0].Detail, slurmcli.GPUs(tres))
	// Output: 2 t4 IDX:0-2 4
}

// A record is the requested fields joined by the call's random field separator, then
// its record separator and a newline; a job name may hold anything, 0x1F and newlines
// included.
func ExampleParseSqueue() {
	s := slurmcli.Separators{Field: "ESF3f9c", Record: "ESR81d0"} // NewSeparators() in real calls
	fields := []string{"12", "my job|x\x1f\nfake", "RUNNING", "normal", "2", "2", "gres:gpu:v100:2", "N/A", "n[1-2]", "None",
		"2026-11-30T12:36:47", "2026-11-30T12:41:47", "5:00", "(null)", "n1", "es step=1/4 workers=3/8 d1",
		"alice", "proj", "/home/alice", "", "N/A", "N/A", "cpu=2,node=2,billing=2,gres/gpu=4", "1", "normal", "1001"}
	out := strings.Join(fields, s.Field) + s.Record + "\n"
	jobs, skipped, err := slurmcli.ParseSqueue([]byte(out), s)
	if err != nil || len(skipped) > 0 {
		fmt.Println(err, skipped)
		return
	}
	gpus, _ := jobs[0].GPUs()
	fmt.Printf("%s %q %s(%s) %s gpus=%d comment=%q\n", jobs[0].ID, jobs[0].Name, jobs[0].User, jobs[0].UID, jobs[0].NodeList, gpus, jobs[0].Comment)
	// Output: 12 "my job|x\x1f\nfake" alice(1001) n[1-2] gpus=4 comment="es step=1/4 workers=3/8 d1"
}

func ExampleParseScontrol() {
	out := "JobId=7 JobName=my job UserId=root(0) JobState=RUNNING NumNodes=1 Comment=es step=3/8 workers=1/8 d1  TresPerJob=gres:gpu:3\n"
	recs, _ := slurmcli.ParseScontrol([]byte(out), slurmcli.KindJob)
	d, _ := slurmcli.JobDetailOf(recs[0])
	gpus, _ := d.GPUs()
	fmt.Printf("%q %q gpus=%d\n", d.Name, d.Comment, gpus)
	// Output: "my job" "es step=3/8 workers=1/8 d1" gpus=3
}
