package cmdline

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// ExitUsage is the exit status of a command given bad flags or arguments.
const ExitUsage = 2

// Parse parses args into fs, a flag set made with pflag.ContinueOnError.
// --help (or -h) prints the usage (fs.Usage, called by pflag) and gives
// code 0; a bad flag prints it as BadUsage does and gives ExitUsage. ok is
// true when the flags are parsed and the command goes on, false when it
// should return code.
func Parse(fs *pflag.FlagSet, args []string) (code int, ok bool) {
	return result(fs, fs.Parse(args))
}

// ParseHelpTo is Parse with the usage that --help asks for written to w
// (a command printing its help on stdout) instead of fs.Output(). fs.Usage
// must write to fs.Output(); errors still go to fs.Output().
func ParseHelpTo(w io.Writer, fs *pflag.FlagSet, args []string) (code int, ok bool) {
	errOut := fs.Output()
	fs.SetOutput(w)
	err := fs.Parse(args)
	fs.SetOutput(errOut)
	return result(fs, err)
}

func result(fs *pflag.FlagSet, err error) (int, bool) {
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, pflag.ErrHelp):
		return 0, false
	}
	return BadUsage(fs, err), false
}

// BadUsage prints "NAME: ERROR" (NAME is fs.Name()), a blank line and the
// usage (fs.Usage) to fs.Output() and returns ExitUsage. Commands call it
// for the arguments their own checks refuse after Parse.
func BadUsage(fs *pflag.FlagSet, err error) int {
	fmt.Fprintf(fs.Output(), "%s: %v\n\n", fs.Name(), err)
	if fs.Usage != nil {
		fs.Usage()
	}
	return ExitUsage
}
