package submit

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/easyscale/easyscale-slurm/internal/elastic"
)

// directivePrefix starts an sbatch directive line.
const directivePrefix = "#SBATCH"

// hiddenPrefix replaces directivePrefix on the wrapper's own lines.
const hiddenPrefix = "# easyscale-sbatch:"

// Script is what the wrapper learns from a batch script's directives.
type Script struct {
	Owned    elastic.Settings // the wrapper's options, Origin "FILE:LINE"
	Nodes    bool             // a directive sets -N/--nodes
	NodesArg string           // its value (the last directive's)
	Comment  bool             // a directive sets --comment
	NoKill   NoKill           // a directive sets -k/--no-kill[=off] (the last one wins)
	HetJob   bool             // "#SBATCH hetjob" (or packjob)
	Hidden   []byte           // the script with the wrapper's directive lines commented out; nil if none
}

// DirectiveError reports a directive the wrapper cannot handle.
type DirectiveError struct {
	File string
	Line int
	Err  error
}

// Error names the file and line.
func (e *DirectiveError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the cause.
func (e *DirectiveError) Unwrap() error { return e.Err }

// ScanScript reads the #SBATCH directives of a batch script like sbatch:
// lines that start with "#SBATCH", up to the first line that is neither
// blank nor a comment. A directive's words are split on blanks, honour
// single and double quotes, and end at an unquoted "#". name labels errors
// and origins. Errors are *DirectiveError: a line mixing the wrapper's
// options with sbatch's, or an unterminated quote.
func ScanScript(data []byte, name string) (Script, error) {
	var s Script
	lines := bytes.SplitAfter(data, []byte("\n"))
	var hide []int
	for n, raw := range lines {
		line := strings.TrimRight(string(raw), "\r\n")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		if !strings.HasPrefix(trimmed, "#") {
			break
		}
		if !strings.HasPrefix(line, directivePrefix) {
			continue
		}
		owns, err := s.directive(line[len(directivePrefix):], fmt.Sprintf("%s:%d", name, n+1))
		if err != nil {
			return Script{}, &DirectiveError{File: name, Line: n + 1, Err: err}
		}
		if owns {
			hide = append(hide, n)
		}
	}
	if len(hide) > 0 {
		for _, n := range hide {
			lines[n] = append([]byte(hiddenPrefix), lines[n][len(directivePrefix):]...)
		}
		s.Hidden = bytes.Join(lines, nil)
	}
	return s, nil
}

// directive scans one directive's words; it reports whether the line holds
// the wrapper's options (then it must hold nothing else).
func (s *Script) directive(rest, origin string) (bool, error) {
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return false, nil // e.g. "#SBATCHX": not a directive
	}
	words, err := splitWords(rest)
	if err != nil {
		return false, err
	}
	if len(words) == 1 && (words[0] == "hetjob" || words[0] == "packjob") {
		s.HetJob = true
		return false, nil
	}
	a := ScanArgs(words)
	s.Nodes = s.Nodes || a.Nodes
	if a.Nodes {
		s.NodesArg = a.NodesArg
	}
	s.Comment = s.Comment || a.Comment
	if a.NoKill != NoKillUnset {
		s.NoKill = a.NoKill
	}
	owned := 0
	for _, p := range []struct{ from, to *elastic.Setting }{
		{&a.Owned.Elastic, &s.Owned.Elastic},
		{&a.Owned.LogicalWorkers, &s.Owned.LogicalWorkers},
		{&a.Owned.Determinism, &s.Owned.Determinism},
		{&a.Owned.Speeds, &s.Owned.Speeds},
	} {
		if p.from.Set {
			owned++
			*p.to = elastic.Setting{Set: true, Value: p.from.Value, Origin: origin}
		}
	}
	if owned > 0 && len(a.Passed) > 0 {
		return false, fmt.Errorf("put --elastic, --logical-workers, --determinism and --speeds on #SBATCH lines of their own (found %q)",
			strings.Join(a.Passed, " "))
	}
	return owned > 0, nil
}

// splitWords splits on blanks with shell-like quotes; an unquoted "#" ends
// the words.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == '#':
			i = len(s)
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
