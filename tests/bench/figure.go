package main

import (
	"fmt"
	"io"
	"sort"
)

// figure is one measured number printed by `make bench` as a
// `name value unit` line.
type figure struct {
	Name  string
	Value float64
	Unit  string
}

// suite measures one group of figures. Suites register themselves from
// init functions in their own files (gemm.go, statedb.go, ...).
type suite func() ([]figure, error)

var suites = map[string]suite{}

// register adds a suite under name; main runs them in name order.
func register(name string, s suite) { suites[name] = s }

func suiteNames() []string {
	names := make([]string, 0, len(suites))
	for n := range suites {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func printFigures(w io.Writer, figs []figure) {
	for _, f := range figs {
		fmt.Fprintf(w, "%s %.4g %s\n", f.Name, f.Value, f.Unit)
	}
}
