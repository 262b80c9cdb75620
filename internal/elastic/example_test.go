package elastic_test

import (
	"fmt"
	"os"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
)

// A submission tool merges command-line flags over the environment twins,
// validates, and records the request in the job comment.
func Example() {
	flags := elastic.Settings{
		Elastic: elastic.Setting{Set: true, Value: "1-4", Origin: "--elastic"},
	}
	env := elastic.FromEnv(func(k string) (string, bool) {
		return map[string]string{"EASYSCALE_LOGICAL_WORKERS": "8"}[k], k == "EASYSCALE_LOGICAL_WORKERS"
	})
	req, err := elastic.Merge(flags, env).Request()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println(elastic.Comment{Request: req})
	// Output: es-req min=1 max=4 lw=8 d1
}

func ExampleSettings_Request_reversedRange() {
	s := elastic.Settings{Elastic: elastic.Setting{Set: true, Value: "4-2", Origin: "--elastic"}}
	_, err := s.Request()
	fmt.Println(err)
	// Output: invalid --elastic=4-2: minimum 4 larger than maximum 2
}

func ExampleParseComment() {
	c, err := elastic.ParseComment("es step=1200/5000 workers=6/8 d1 req=1-4")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Request.Range(), c.Request.LogicalWorkers, c.Progress.Step, c.Progress.Workers)
	// Output: 1-4 8 1200 6
}
