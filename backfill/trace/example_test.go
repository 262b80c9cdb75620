package trace_test

import (
	"fmt"
	"strings"

	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

func ExampleRead() {
	table := `name,time,application,num_replicas,batch_size
cifar10-0,107,cifar10,6,2048
ncf-2,135,ncf,1,32768
`
	jobs, err := trace.Read(strings.NewReader(table))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, j := range jobs {
		fmt.Printf("%s submit=%ds gpus=%d duration=%ds\n", j.ID, j.Submit, j.GPUs, j.Duration)
	}
	// Output:
	// cifar10-0 submit=107s gpus=6 duration=1920s
	// ncf-2 submit=135s gpus=1 duration=1800s
}

func ExampleReadReport() {
	table := `job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,min-gpus
a,0,600,4,,Pass,1,1
b,30,,2,,Failed,1,
`
	jobs, rep, err := trace.ReadReport(strings.NewReader(table))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d job, %d row skipped (empty duration_s)\n", len(jobs), rep.Skipped)
	for col, meant := range rep.Misspelt {
		fmt.Printf("column %q is ignored: did you mean %q?\n", col, meant)
	}
	// Output:
	// 1 job, 1 row skipped (empty duration_s)
	// column "min-gpus" is ignored: did you mean "min_gpus"?
}
