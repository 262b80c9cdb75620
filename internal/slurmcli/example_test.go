package slurmcli_test

import (
	"fmt"

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

// A record is the requested fields, each ending in 0x1F, then a newline; the job name
// may hold spaces and '|'.
func ExampleParseSqueue() {
	out := "12\x1fmy job|x\x1fRUNNING\x1fnormal\x1f2\x1f2\x1fgres:gpu:v100:2\x1fN/A\x1fn[1-2]\x1fNone\x1f" +
		"2026-11-30T12:36:47\x1f2026-11-30T12:41:47\x1f5:00\x1f(null)\x1fn1\x1fes step=1/4 workers=3/8 d1\x1f\n"
	jobs, err := slurmcli.ParseSqueue([]byte(out))
	if err != nil {
		fmt.Println(err)
		return
	}
	gpus, _ := jobs[0].GPUs()
	fmt.Printf("%s %q %s gpus=%d comment=%q\n", jobs[0].ID, jobs[0].Name, jobs[0].NodeList, gpus, jobs[0].Comment)
	// Output: 12 "my job|x" n[1-2] gpus=4 comment="es step=1/4 workers=3/8 d1"
}

func ExampleParseScontrol() {
	out := "JobId=7 JobName=my job UserId=root(0) JobState=RUNNING NumNodes=1 Comment=es step=3/8 workers=1/8 d1  TresPerJob=gres:gpu:3\n"
	recs, _ := slurmcli.ParseScontrol([]byte(out), slurmcli.KindJob)
	d, _ := slurmcli.JobDetailOf(recs[0])
	gpus, _ := d.GPUs()
	fmt.Printf("%q %q gpus=%d\n", d.Name, d.Comment, gpus)
	// Output: "my job" "es step=3/8 workers=1/8 d1" gpus=3
}
