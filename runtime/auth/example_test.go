package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
)

// The coordinator writes the job secret into its state directory; a worker
// that loads it authenticates, a worker of another job is refused.
func Example() {
	dir, _ := os.MkdirTemp("", "easyscale-auth-example")
	defer os.RemoveAll(dir)
	secret, err := auth.NewSecret(filepath.Join(dir, "job.secret"))
	if err != nil {
		fmt.Println(err)
		return
	}
	loaded, _ := auth.LoadSecret(filepath.Join(dir, "job.secret"))

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			auth.Server(context.Background(), c, auth.Config{JobID: "mnist-1", Secret: secret})
			c.Close()
		}
	}()

	join := func(job string) error {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = auth.Client(context.Background(), c, auth.Config{JobID: job, Secret: loaded}, "worker")
		return err
	}
	fmt.Println("same job:", join("mnist-1"))
	err = join("mnist-2")
	fmt.Println("other job refused:", errors.Is(err, auth.ErrWrongJob))
	// Output:
	// same job: <nil>
	// other job refused: true
}
