// Package cmdline holds the command-line conventions every easyscale
// program follows, so that each main parses its flags the same way:
// pflag flag sets that return errors instead of exiting, --help (-h)
// printing the usage with exit status 0, and a bad flag or argument
// printing "NAME: ERROR", a blank line and the usage with exit status 2
// (ExitUsage).
package cmdline
