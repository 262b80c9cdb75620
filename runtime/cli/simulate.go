package cli

import (
	"fmt"
	"strings"
)

// movedSimulate is what `easyscale simulate` prints: the simulator is its
// own command, so that this binary, which runs on every compute node, does
// not link it and its plotting library (issue 10, item 7).
const movedSimulate = "easyscale: simulate is now its own command, easyscale-simulate, with the same flags:\n" +
	"  easyscale-simulate%s\n(make build puts it in bin/; easyscale-simulate --help lists the flags)\n"

// simulateCmd answers the retired `easyscale simulate` with the command to
// run instead, the arguments carried over, and exit status 2 (bad usage).
func simulateCmd(args []string, env Env) int {
	carried := ""
	if len(args) > 0 {
		carried = " " + strings.Join(args, " ") // none: no trailing blank (a new user's finding)
	}
	fmt.Fprintf(env.Stderr, movedSimulate, carried)
	return 2
}
