package submit_test

import (
	"fmt"
	"os"

	"github.com/easyscale/easyscale-slurm/sbatch-wrap/submit"
)

// Prepare shows what easyscale-sbatch would run, without running it.
func ExamplePrepare() {
	in := submit.Input{
		Lookup:   func(string) (string, bool) { return "", false },
		ReadFile: os.ReadFile,
	}
	plan, err := submit.Prepare([]string{"--elastic=1-4", "--logical-workers=8", "--parsable", "--wrap", "srun true"}, in)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q\n", plan.Args)
	fmt.Println(plan.Env)
	// Output:
	// ["--nodes=1" "--no-kill" "--comment=es-req min=1 max=4 lw=8 d1" "--parsable" "--wrap" "srun true"]
	// [EASYSCALE_ELASTIC=1-4 EASYSCALE_LOGICAL_WORKERS=8 EASYSCALE_DETERMINISM=d1 SLURM_NO_KILL=set]
}
