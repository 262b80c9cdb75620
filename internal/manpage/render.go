package manpage

import (
	"fmt"
	"strings"
)

// Page is one man page: a program's help and, for a program with
// subcommands, each subcommand's.
type Page struct {
	Name    string // program name, e.g. easyscale-sbatch
	Section int    // 1 (user commands) or 8 (administration)
	Version string // printed in the footer, e.g. 0.2.0
	Date    string // printed in the footer, YYYY-MM-DD
	Help    Help
	Subs    []Sub    // subcommands in order; empty for a plain program
	SeeAlso []string // other pages as name(section)
}

// Sub is a subcommand's help.
type Sub struct {
	Name string // e.g. run
	Help Help
}

// Render writes the page in roff with the man(7) macros.
func Render(p Page) string {
	var b strings.Builder
	fmt.Fprintf(&b, ".\\\" Generated from `%s --help` by internal/manpage (make man); do not edit.\n", p.Name)
	fmt.Fprintf(&b, ".TH %s %d %s %s %s\n", quote(strings.ToUpper(p.Name)), p.Section, quote(p.Date),
		quote("easyscale "+p.Version), quote("EasyScale for Slurm"))
	b.WriteString(".SH NAME\n")
	fmt.Fprintf(&b, "%s \\- %s\n", esc(p.Name), esc(NameLine(p.Help.Summary)))
	b.WriteString(".SH SYNOPSIS\n")
	synopsis(&b, p.Help.Synopsis)
	b.WriteString(".SH DESCRIPTION\n")
	blocks(&b, p.Help.Blocks, ".SH")
	for _, s := range p.Subs {
		fmt.Fprintf(&b, ".SH %s\n", quote(strings.ToUpper(p.Name+" "+s.Name)))
		synopsis(&b, s.Help.Synopsis)
		blocks(&b, s.Help.Blocks, ".SS")
	}
	if len(p.SeeAlso) > 0 {
		b.WriteString(".SH SEE ALSO\n")
		for i, ref := range p.SeeAlso {
			name, sec, _ := strings.Cut(strings.TrimSuffix(ref, ")"), "(")
			sep := ","
			if i == len(p.SeeAlso)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, ".BR %s (%s)%s\n", esc(name), sec, sep)
		}
	}
	return b.String()
}

// NameLine is summary shortened for a page's NAME line, which
// man-pages(7) wants short (whatis and apropos print it): a summary over
// 80 characters is cut at its first " (", ": " or ", " after its 20th
// character, where a clause or an aside begins; the DESCRIPTION keeps it
// whole. "Replays a GPU-cluster job trace (a job table such as ...)
// through ..." becomes "Replays a GPU-cluster job trace".
func NameLine(summary string) string {
	const long, least = 80, 20
	if len([]rune(summary)) <= long {
		return summary
	}
	cut := -1
	for _, sep := range []string{" (", ": ", ", "} {
		if i := strings.Index(summary[min(least, len(summary)):], sep); i >= 0 && (cut < 0 || least+i < cut) {
			cut = least + i
		}
	}
	if cut < 0 {
		return summary
	}
	return summary[:cut]
}

func synopsis(b *strings.Builder, s string) {
	b.WriteString(".nf\n")
	for _, l := range strings.Split(s, "\n") {
		fmt.Fprintf(b, "%s\n", line(l))
	}
	b.WriteString(".fi\n")
}

// blocks writes parsed blocks; a heading becomes a section (level ".SH") or
// subsection (".SS").
func blocks(b *strings.Builder, bs []Block, level string) {
	para := false // a paragraph macro is due before the next text
	for _, bl := range bs {
		switch bl.Kind {
		case Heading:
			fmt.Fprintf(b, "%s %s\n", level, bl.Text)
			para = false
		case Blankish:
			para = true
		case Text:
			if para {
				b.WriteString(".PP\n")
				para = false
			}
			fmt.Fprintf(b, "%s\n", line(bl.Text))
		case Entry:
			fmt.Fprintf(b, ".TP\n.B %s\n", quote(bl.Term))
			if bl.Text != "" {
				fmt.Fprintf(b, "%s\n", line(bl.Text))
			}
			para = true
		case Pre:
			b.WriteString(".PP\n.RS 2\n.nf\n")
			for _, l := range strings.Split(bl.Text, "\n") {
				fmt.Fprintf(b, "%s\n", line(strings.TrimPrefix(l, "  ")))
			}
			b.WriteString(".fi\n.RE\n")
			para = true
		}
	}
}

// esc escapes text for roff: backslashes, hyphens as minus signs (the
// help's hyphens are flag dashes and ranges, meant to be typed), and
// characters beyond ASCII as \[uXXXX], so the page needs no preconv.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-':
			b.WriteString(`\-`)
		case r > 127:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// line escapes one output line; a line that would start with a control
// character ('.' or '\”) gets a zero-width \& first.
func line(s string) string {
	s = esc(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// quote makes s one macro argument.
func quote(s string) string {
	return `"` + strings.ReplaceAll(esc(s), `"`, `\(dq`) + `"`
}
