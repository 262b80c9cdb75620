// Package manpage turns the --help text of an easyscale program (the usage
// line and pflag's flag table that package cmdline prints) into a man page
// in roff (man(7) macros), so the pages a Debian package installs say
// exactly what the programs say (make man, make deb).
//
// The help text is read as it is printed, never re-worded:
//
//	Usage: NAME ...            -> SYNOPSIS (continuation lines kept as they are)
//	a line at column 0         -> DESCRIPTION text, filled; the first sentence is the NAME line
//	"Flags:", "Commands:",     -> the sections OPTIONS, COMMANDS, ENVIRONMENT
//	"Environment:"
//	"Exit status: ..."         -> the section EXIT STATUS
//	"  -o, --out FILE   text"  -> an option (.TP), wherever it stands, unless
//	                              it continues a preformatted block
//	"  word     text" in COMMANDS or ENVIRONMENT -> a definition (.TP)
//	any other indented line    -> a preformatted block, kept as printed
//
// A program with subcommands (easyscale run, worker, ...) gets one
// subsection per subcommand, from that subcommand's --help.
package manpage
