package cmdline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

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

// BadUsage prints "NAME: ERROR" (NAME is fs.Name()), a blank line, the
// usage's synopsis (what fs.Usage prints up to its first blank line) and
// "Run NAME --help for every flag." to fs.Output(), and returns ExitUsage:
// the error stays on the screen, not scrolled away by every flag's help (a
// new user saw 52 lines after a misspelt flag). Commands call it for the
// arguments their own checks refuse after Parse.
func BadUsage(fs *pflag.FlagSet, err error) int {
	out := fs.Output()
	fmt.Fprintf(out, "%s: %v\n\n", fs.Name(), err)
	if fs.Usage != nil {
		var usage bytes.Buffer
		fs.SetOutput(&usage)
		fs.Usage()
		fs.SetOutput(out)
		synopsis, _, _ := strings.Cut(usage.String(), "\n\n")
		fmt.Fprintf(out, "%s\nRun %s --help for every flag.\n", strings.TrimRight(synopsis, "\n"), fs.Name())
	}
	return ExitUsage
}

// HelpColumns is the width (in characters) of the flag tables the
// programs print in their --help: descriptions wrap onto continuation
// lines indented to the description column (internal/manpage joins them).
const HelpColumns = 80

// FlagTable returns fs's flag table for --help, its descriptions wrapped
// at HelpColumns (pflag's FlagUsagesWrapped).
func FlagTable(fs *pflag.FlagSet) string { return fs.FlagUsagesWrapped(HelpColumns) }
