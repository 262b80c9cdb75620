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
