// Package slurm tests the runtime on a real Slurm 22.05 cluster (the lab
// of tests/lab): elastic jobs submitted with easyscale-sbatch, their status
// in squeue, and a shrink by scontrol update.
package slurm

import (
	"fmt"
	"os"
	"testing"

	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

func TestMain(m *testing.M) {
	if err := slurmlab.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(slurmlab.Main(m))
}
