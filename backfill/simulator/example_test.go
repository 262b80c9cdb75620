package simulator_test

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/backfill/simulator"
	"github.com/easyscale/easyscale-slurm/backfill/trace"
)

func ExampleRun() {
	jobs := []trace.Job{
		{ID: "a", Submit: 0, Duration: 1000, GPUs: 1},
		{ID: "b", Submit: 0, Duration: 1000, GPUs: 1},
	}
	for _, p := range []simulator.Policy{simulator.Rigid, simulator.Elastic} {
		res, err := simulator.Run(jobs, simulator.Config{GPUs: []simulator.GPUGroup{{Type: "v100", Count: 4}}, GPUsPerNode: 4, Policy: p})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: mean JCT %.0f s, max reservation delay %d s\n", res.Policy, res.MeanJCT, res.MaxReservationDelay)
	}
	// Output:
	// rigid: mean JCT 1000 s, max reservation delay 0 s
	// elastic: mean JCT 600 s, max reservation delay 0 s
}
