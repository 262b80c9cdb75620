package manpage

import (
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

func TestParseReadsEachPartOfAHelpText(t *testing.T) {
	tests := []struct {
		name string
		help string
		want Help
	}{
		{
			name: "usage, a paragraph and a flag table become synopsis, summary, text and options",
			help: "Usage: prog [--out FILE] ARG\n\nDoes a thing. Then more.\n\nFlags:\n" +
				"  -o, --out FILE            write to FILE (default: stdout)\n" +
				"      --once[=true|false]   run once\n",
			want: Help{Synopsis: "prog [--out FILE] ARG", Summary: "Does a thing", Blocks: []Block{
				{Kind: Text, Text: "Does a thing. Then more."},
				{Kind: Blankish},
				{Kind: Heading, Text: "OPTIONS"},
				{Kind: Entry, Term: "-o, --out FILE", Text: "write to FILE (default: stdout)", Section: "OPTIONS"},
				{Kind: Entry, Term: "--once[=true|false]", Text: "run once", Section: "OPTIONS"},
			}},
		},
		{
			name: "a wrapped flag description's continuation lines join its entry",
			help: "Usage: prog\n\nFlags:\n" +
				"      --config string   admin configuration (TOML) (default\n" +
				"                        \"/etc/x.toml\")\n" +
				"      --once            run one cycle\n" +
				"                        and exit\n",
			want: Help{Synopsis: "prog", Blocks: []Block{
				{Kind: Heading, Text: "OPTIONS"},
				{Kind: Entry, Term: "--config string", Text: "admin configuration (TOML) (default \"/etc/x.toml\")", Section: "OPTIONS"},
				{Kind: Entry, Term: "--once", Text: "run one cycle and exit", Section: "OPTIONS"},
			}},
		},
		{
			name: "a flag table under no heading joins its wrapped lines too, and a text put on the next line has no leading space",
			help: "Usage: prog\n\nOptions of its own:\n" +
				"      --elastic string   run on MIN to MAX\n" +
				"                         nodes\n" +
				"      --a-very-long-flag-name-that-pushes-the-description-column-past-56 string\n" +
				"                run it\n",
			want: Help{Synopsis: "prog", Summary: "Options of its own:", Blocks: []Block{
				{Kind: Text, Text: "Options of its own:"},
				{Kind: Entry, Term: "--elastic string", Text: "run on MIN to MAX nodes"},
				{Kind: Entry, Term: "--a-very-long-flag-name-that-pushes-the-description-column-past-56 string", Text: "run it"},
			}},
		},
		{
			name: "usage continuation lines stay in the synopsis and a paragraph's lines are joined",
			help: "Usage: prog --a A\n            --b B\n\nFirst line\nsecond line.\n",
			want: Help{Synopsis: "prog --a A\n--b B", Summary: "First line second line", Blocks: []Block{
				{Kind: Text, Text: "First line second line."},
			}},
		},
		{
			name: "commands and environment rows are definitions; other indented lines are preformatted",
			help: "Usage: prog COMMAND\n\nCommands:\n  run    train\n  stop   halt\n\nEnvironment:\n  X   the x\n\n" +
				"Adds:\n  --nodes=MIN   start small\n  --no-kill     keep going\n                when a node fails\n",
			want: Help{Synopsis: "prog COMMAND", Blocks: []Block{
				{Kind: Heading, Text: "COMMANDS"},
				{Kind: Entry, Term: "run", Text: "train", Section: "COMMANDS"},
				{Kind: Entry, Term: "stop", Text: "halt", Section: "COMMANDS"},
				{Kind: Blankish},
				{Kind: Heading, Text: "ENVIRONMENT"},
				{Kind: Entry, Term: "X", Text: "the x", Section: "ENVIRONMENT"},
				{Kind: Blankish},
				{Kind: Text, Text: "Adds:"},
				{Kind: Pre, Text: "  --nodes=MIN   start small\n  --no-kill     keep going\n                when a node fails"},
			}},
		},
		{
			name: "an exit status paragraph is its own section and an empty flag table is dropped",
			help: "Usage: prog\n\nExit status: 0 ok,\n2 bad flags.\n\nFlags:\n",
			want: Help{Synopsis: "prog", Blocks: []Block{
				{Kind: Heading, Text: "EXIT STATUS"},
				{Kind: Text, Text: "0 ok, 2 bad flags."},
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.help)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseRefusesTextWithoutAUsageLine(t *testing.T) {
	for _, text := range []string{"", "\n\n", "prog: error: bad flag\n", "f690343\n"} {
		_, err := Parse(text)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, want a *ParseError", text, err)
		}
	}
}

func TestRenderEscapesRoffAndKeepsEveryOption(t *testing.T) {
	h, err := Parse("Usage: prog [-x]\n\nCopies C:\\dir. Uses …\n\nFlags:\n" +
		"  -x, --exclude string   skip paths matching it\n      --dry-run[=true|false]   say, do nothing\n")
	if err != nil {
		t.Fatal(err)
	}
	page := Render(Page{Name: "prog", Section: 1, Version: "1.0", Date: "2026-01-02", Help: h,
		Subs: []Sub{{Name: "run", Help: Help{Synopsis: ".run starts with a dot"}}}, SeeAlso: []string{"sbatch(1)"}})
	for _, want := range []string{
		`.TH "PROG" 1 "2026\-01\-02" "easyscale 1.0" "EasyScale for Slurm"`,
		`prog \- Copies C:\edir`,
		".TP\n.B \"\\-x, \\-\\-exclude string\"\nskip paths matching it\n",
		".TP\n.B \"\\-\\-dry\\-run[=true|false]\"\n",
		`Uses \[u2026]`,
		".SH \"PROG RUN\"\n.nf\n\\&.run starts with a dot\n.fi\n",
		".SH SEE ALSO\n.BR sbatch (1)\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Skip("groff not installed: the page's roff is not checked")
	}
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z")
	cmd.Stdin = strings.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("groff -ww: %v\n%s", err, out)
	}
}

func TestNameLineIsShort(t *testing.T) {
	for _, tc := range []struct{ summary, want string }{
		{"Elastic, accuracy-consistent training (EasyScale on Slurm)", "Elastic, accuracy-consistent training (EasyScale on Slurm)"},
		{"Replays a GPU-cluster job trace (a job table such as shared/traces/philly/philly_busy_week.csv, or a Pollux workload) through a scheduler",
			"Replays a GPU-cluster job trace"},
		{"A drop-in for sbatch that submits EasyScale jobs: elastic, accuracy-consistent training whose result does not depend on the workers",
			"A drop-in for sbatch that submits EasyScale jobs"},
		{"Draws the training loss and the physical workers per step of each run, overlaid, and says whether their parameters agree at every step",
			"Draws the training loss and the physical workers per step of each run"},
		{"A summary far longer than eighty characters that has no clause or aside anywhere in it at all to cut", "A summary far longer than eighty characters that has no clause or aside anywhere in it at all to cut"},
	} {
		if got := NameLine(tc.summary); got != tc.want {
			t.Errorf("NameLine(%q) = %q, want %q", tc.summary, got, tc.want)
		}
	}
}
