package slurmlab_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// A test package that needs Slurm starts the lab once in TestMain. (Examples here are
// compiled, not run: they need a lab cluster.)
func ExampleMain() {
	var m *testing.M // the *testing.M that TestMain receives
	if m != nil {
		os.Exit(slurmlab.Main(m))
	}
}

// A test submits a batch script and waits for it to finish.
func ExampleLab_Submit() {
	_ = func(t *testing.T) {
		l := slurmlab.Require(t)
		id := l.Submit(t, "#!/bin/sh\necho $CUDA_VISIBLE_DEVICES\n", "--gres=gpu:1", "-t", "1")
		if _, err := l.WaitState(context.Background(), id, 30*time.Second, "COMPLETED"); err != nil {
			t.Fatal(err)
		}
	}
}
