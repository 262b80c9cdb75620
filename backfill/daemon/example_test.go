package daemon_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/easyscale/easyscale-slurm/backfill/config"
	"github.com/easyscale/easyscale-slurm/backfill/daemon"
)

// The sbatch command line of an extra job that lends two v100 GPUs on n2 to
// elastic job 42 for 7 minutes.
func ExampleExtraSpec_Args() {
	dir := "/home/alice/run/.easyscale/42"
	spec := daemon.ExtraSpec{Parent: "42", User: "alice", Group: "1001", Account: "proj", Partition: "low",
		Node: "n2", GPUType: "v100", GPUs: 2, TimeLimitMinutes: 7, WorkDir: "/home/alice/run", Rendezvous: dir,
		Script: daemon.WorkerScript(config.DefaultWorkerCommand, "42", dir)}
	args, err := spec.Args(true)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("sbatch " + strings.Join(args, "\n  "))
	// Output:
	// sbatch --parsable
	//   --job-name=es-extra-42
	//   --comment=es-extra parent=42
	//   --partition=low
	//   --nodes=1
	//   --ntasks=2
	//   --nodelist=n2
	//   --time=7
	//   --no-requeue
	//   --gres=gpu:v100:2
	//   --export=ALL,SLURM_GPUS_PER_TASK=1
	//   --account=proj
	//   --uid=alice
	//   --gid=1001
	//   --chdir=/home/alice/run
	//   --output=/home/alice/run/.easyscale/42/extra-%j.out
	//   --wrap=srun easyscale worker --join "$(cat /home/alice/run/.easyscale/42/coordinator)" --token-file /home/alice/run/.easyscale/42/token
}

// After cycles that failed while slurmctld answered (a command or database
// error), retries wait the poll interval, doubling up to max_backoff. (While
// slurmctld does not answer, the daemon pings it every poll interval
// instead.)
func ExampleBackoff() {
	for failures := 1; failures <= 5; failures++ {
		fmt.Print(daemon.Backoff(10*time.Second, time.Minute, failures), " ")
	}
	fmt.Println()
	// Output: 10s 20s 40s 1m0s 1m0s
}
