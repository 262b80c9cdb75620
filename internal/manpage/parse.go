package manpage

import (
	"fmt"
	"regexp"
	"strings"
)

// Block kinds of a parsed help text, in the order they are printed.
const (
	Text     = "text"     // a paragraph at column 0, lines joined with spaces
	Pre      = "pre"      // indented lines kept as printed
	Entry    = "entry"    // an option or definition: Term and Text
	Heading  = "heading"  // a section heading the help names: Text is OPTIONS, COMMANDS or ENVIRONMENT
	Blankish = "blankish" // a paragraph break inside a section
)

// Block is one piece of a help text.
type Block struct {
	Kind    string
	Term    string // Entry: the flag spec or word being defined
	Text    string
	Section string // the heading it stands under ("" before the first)
}

// Help is a parsed --help text.
type Help struct {
	Synopsis string  // the usage after "Usage: ", continuation lines included (newline-separated)
	Summary  string  // first sentence of the first paragraph, without its full stop ("" when none)
	Blocks   []Block // the rest, in order
}

// ParseError says why a help text could not be read.
type ParseError struct {
	Line int // 1-based
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("help text line %d: %s", e.Line, e.Msg) }

// sections maps the headings the programs print to man page sections.
var sections = map[string]string{"Flags:": "OPTIONS", "Commands:": "COMMANDS", "Environment:": "ENVIRONMENT"}

// exitStatus starts the paragraph that becomes the EXIT STATUS section.
const exitStatus = "Exit status: "

// flagLine is a pflag flag table row: "  -o, --output FILE   text" or
// "      --once[=true|false]   text" (the text may be missing).
var flagLine = regexp.MustCompile(`^ {2,}((?:-[A-Za-z0-9], )?--[A-Za-z0-9][A-Za-z0-9-]*(?:\[=[^\]]*\])?(?: [^ ]+)?)(?: {2,}(.*))?$`)

// defLine is a definition row of a Commands or Environment table.
var defLine = regexp.MustCompile(`^ {2}([^ ]+) {2,}(.+)$`)

// Parse reads the --help text of one program or subcommand. It returns a
// *ParseError when the text does not start with a "Usage: " line.
func Parse(text string) (Help, error) {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(text, "\r\n", "\n"), "\n"), "\n")
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i == len(lines) || !strings.HasPrefix(lines[i], "Usage: ") {
		return Help{}, &ParseError{Line: i + 1, Msg: `no "Usage: " line`}
	}
	var h Help
	syn := []string{strings.TrimPrefix(lines[i], "Usage: ")}
	for i++; i < len(lines) && strings.HasPrefix(lines[i], " "); i++ {
		syn = append(syn, strings.TrimLeft(lines[i], " "))
	}
	h.Synopsis = strings.Join(syn, "\n")
	section := ""
	inPre := false // the previous line went into a preformatted block
	var para []string
	flush := func() {
		if len(para) > 0 {
			h.Blocks = append(h.Blocks, Block{Kind: Text, Text: strings.Join(para, " ")})
			para = nil
		}
	}
	for ; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		wasPre := inPre
		inPre = false
		switch {
		case trimmed == "":
			flush()
			if n := len(h.Blocks); n > 0 && h.Blocks[n-1].Kind != Blankish && h.Blocks[n-1].Kind != Heading {
				h.Blocks = append(h.Blocks, Block{Kind: Blankish})
			}
		case sections[l] != "":
			flush()
			section = sections[l]
			h.Blocks = append(h.Blocks, Block{Kind: Heading, Text: section})
		case strings.HasPrefix(l, exitStatus) && len(para) == 0:
			section = "EXIT STATUS"
			h.Blocks = append(h.Blocks, Block{Kind: Heading, Text: section})
			para = append(para, strings.TrimPrefix(l, exitStatus))
		case !strings.HasPrefix(l, " "):
			para = append(para, trimmed)
		case continuesEntry(h.Blocks, para, l):
			b := &h.Blocks[len(h.Blocks)-1]
			b.Text = strings.TrimSpace(b.Text + " " + trimmed) // pflag puts a wide term's whole text on the next line
		case flagLine.MatchString(l) && !wasPre:
			flush()
			m := flagLine.FindStringSubmatch(l)
			h.Blocks = append(h.Blocks, Block{Kind: Entry, Term: m[1], Text: m[2], Section: section})
		case (section == "COMMANDS" || section == "ENVIRONMENT") && inTable(h.Blocks, para) && defLine.MatchString(l):
			flush()
			m := defLine.FindStringSubmatch(l)
			h.Blocks = append(h.Blocks, Block{Kind: Entry, Term: m[1], Text: m[2], Section: section})
		default:
			flush()
			inPre = true
			if n := len(h.Blocks); n > 0 && h.Blocks[n-1].Kind == Pre {
				h.Blocks[n-1].Text += "\n" + l
			} else {
				h.Blocks = append(h.Blocks, Block{Kind: Pre, Text: l})
			}
		}
	}
	flush()
	h.Blocks = dropEmptyHeadings(h.Blocks)
	for _, b := range h.Blocks {
		if b.Kind == Text {
			h.Summary = firstSentence(b.Text)
			break
		}
		if b.Kind == Heading {
			break
		}
	}
	return h, nil
}

// continuationIndent is the least indentation of a flag description's
// continuation line: pflag's wrapped table (FlagUsagesWrapped) indents it
// to the description column, past every flag's own indentation (6).
const continuationIndent = 8

// continuesEntry reports whether line l continues the description of the
// entry just read (a flag table's row, under a heading or not, or a
// Commands or Environment row): right after it, indented to at least
// continuationIndent and not a flag row itself.
func continuesEntry(blocks []Block, para []string, l string) bool {
	n := len(blocks)
	if len(para) > 0 || n == 0 || blocks[n-1].Kind != Entry || flagLine.MatchString(l) {
		return false
	}
	indent := len(l) - len(strings.TrimLeft(l, " "))
	return indent >= continuationIndent && indent < len(l)
}

// firstSentence returns s up to its first ". " (or its end), without the full stop.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, ".")
}

// dropEmptyHeadings removes trailing breaks and headings with nothing under
// them ("Flags:" of a command without flags).
func dropEmptyHeadings(bs []Block) []Block {
	var out []Block
	for i, b := range bs {
		if b.Kind == Heading {
			j := i + 1
			for j < len(bs) && bs[j].Kind == Blankish {
				j++
			}
			if j == len(bs) || bs[j].Kind == Heading {
				continue
			}
		}
		out = append(out, b)
	}
	for len(out) > 0 && out[len(out)-1].Kind == Blankish {
		out = out[:len(out)-1]
	}
	return out
}

// inTable reports whether the next row continues a table: nothing but
// breaks since its heading or its last row.
func inTable(bs []Block, para []string) bool {
	if len(para) > 0 {
		return false
	}
	for i := len(bs) - 1; i >= 0; i-- {
		switch bs[i].Kind {
		case Blankish:
			continue
		case Heading, Entry:
			return true
		}
		return false
	}
	return false
}
