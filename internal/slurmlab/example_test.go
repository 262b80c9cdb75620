package slurmlab_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/easyscale/easyscale-slurm/internal/slurmlab"
)

// A test package that needs Slurm starts the lab once in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(slurmlab.Main(m)) }
func ExampleMain() {}

// A test submits a batch script and waits for it to finish.
func ExampleLab_Submit() {
	test := func(t *testing.T) {
		l := slurmlab.Require(t)
		id := l.Submit(t, "#!/bin/sh\necho $CUDA_VISIBLE_DEVICES\n", "--gres=gpu:1", "-t", "1")
		if _, err := l.WaitState(context.Background(), id, 30*time.Second, "COMPLETED"); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println(test != nil)
	// Output: true
}
