// Command bench prints the project's performance figures as `name value unit`
// lines, one per figure (see BENCHMARKS.md). Usage: go run ./tests/bench [SUITE...]
package main

import (
	"fmt"
	"os"
)

func main() {
	names := os.Args[1:]
	if len(names) == 0 {
		names = suiteNames()
	}
	failed := false
	for _, n := range names {
		s, ok := suites[n]
		if !ok {
			fmt.Fprintf(os.Stderr, "bench: unknown suite %q (known: %v)\n", n, suiteNames())
			os.Exit(2)
		}
		figs, err := s()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: suite %s: %v\n", n, err)
			failed = true
			continue
		}
		printFigures(os.Stdout, figs)
	}
	if failed {
		os.Exit(1)
	}
}
