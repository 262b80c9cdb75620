// Command mkman writes the man pages of the easyscale programs from their
// --help (package manpage): make man runs it on bin/ after make build.
//
//	go run ./internal/manpage/mkman --bin bin --out bin/man --version 0.2.0 --date 2026-12-02
//
// Every executable easyscale* in --bin must have a page here: a new
// command without one fails the build of the package.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/easyscale/easyscale-slurm/internal/manpage"
)

// program is how one man page is made.
type program struct {
	name    string
	section int
	env     []string // added to the clean environment the program runs in
	cut     string   // the help ends before a line starting with this ("" keeps all)
}

var programs = []program{
	{name: "easyscale", section: 1},
	{name: "easyscale-plot", section: 1},
	// the wrapper's help appends sbatch's own, which is sbatch(1)'s business
	{name: "easyscale-sbatch", section: 1, env: []string{"SBATCH=/bin/false"}, cut: "(/bin/false --help"},
	{name: "easyscale-simulate", section: 1},
	{name: "easyscale-backfilld", section: 8},
	{name: "easyscale-gpuctx", section: 8},
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "mkman: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := pflag.NewFlagSet("mkman", pflag.ContinueOnError)
	bin := fs.String("bin", "bin", "directory of the built programs")
	out := fs.String("out", "bin/man", "directory for the pages (manN/NAME.N)")
	version := fs.String("version", "dev", "version for the footer")
	date := fs.String("date", "", "date for the footer, YYYY-MM-DD (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *date == "" {
		return errors.New("--date is required")
	}
	if err := everyProgramHasAPage(*bin); err != nil {
		return err
	}
	for _, p := range programs {
		page, err := makePage(*bin, p, *version, *date)
		if err != nil {
			return err
		}
		dir := filepath.Join(*out, fmt.Sprintf("man%d", p.section))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("making %s: %w", dir, err)
		}
		file := filepath.Join(dir, fmt.Sprintf("%s.%d", p.name, p.section))
		if err := os.WriteFile(file, []byte(manpage.Render(page)), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", file, err)
		}
	}
	return nil
}

// everyProgramHasAPage fails when bin holds an executable easyscale*
// program that programs does not list.
func everyProgramHasAPage(bin string) error {
	known := map[string]bool{}
	for _, p := range programs {
		known[p.name] = true
	}
	files, err := filepath.Glob(filepath.Join(bin, "easyscale*"))
	if err != nil {
		return fmt.Errorf("listing %s: %w", bin, err)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 || strings.HasSuffix(f, ".so") {
			continue
		}
		if !known[filepath.Base(f)] {
			return fmt.Errorf("%s has no man page: add it to mkman's programs", f)
		}
	}
	return nil
}

func makePage(bin string, p program, version, date string) (manpage.Page, error) {
	h, err := help(bin, p)
	if err != nil {
		return manpage.Page{}, err
	}
	page := manpage.Page{Name: p.name, Section: p.section, Version: version, Date: date, Help: h}
	for _, b := range h.Blocks {
		if b.Kind != manpage.Entry || b.Section != "COMMANDS" || b.Term == "version" {
			continue // an option, or `easyscale version` (which prints the version, no help)
		}
		sh, err := help(bin, p, b.Term)
		if err != nil {
			return manpage.Page{}, err
		}
		page.Subs = append(page.Subs, manpage.Sub{Name: b.Term, Help: sh})
	}
	for _, o := range programs {
		if o.name != p.name {
			page.SeeAlso = append(page.SeeAlso, fmt.Sprintf("%s(%d)", o.name, o.section))
		}
	}
	page.SeeAlso = append(page.SeeAlso, "easyscale-spank(8)", "sbatch(1)", "srun(1)")
	return page, nil
}

// help runs `NAME [SUB] --help` in a clean environment and parses what it prints.
func help(bin string, p program, sub ...string) (manpage.Help, error) {
	cmd := exec.Command(filepath.Join(bin, p.name), append(sub, "--help")...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "LANG=C", "HOME=/nonexistent"}, p.env...)
	out, err := cmd.CombinedOutput()
	what := strings.Join(append([]string{p.name}, sub...), " ") + " --help"
	if err != nil {
		return manpage.Help{}, fmt.Errorf("running %s: %w\n%s", what, err, out)
	}
	text := string(out)
	if p.cut != "" {
		if i := strings.Index(text, "\n"+p.cut); i >= 0 {
			text = text[:i+1]
		}
	}
	h, err := manpage.Parse(text)
	if err != nil {
		return manpage.Help{}, fmt.Errorf("reading %s: %w", what, err)
	}
	return h, nil
}
