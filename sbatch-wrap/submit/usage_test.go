package submit

import (
	"testing"

	"github.com/easyscale/easyscale-slurm/internal/manpage"
)

// TestUsageReadsAsOneEntryPerOption parses the help as the man page
// generator does (internal/manpage): each of the four options is one
// entry with its whole description, wrapped lines joined (a reviewer saw
// easyscale-sbatch(1) keep --elastic only, cut at "MIN to MAX", once
// --help wrapped at 80 columns).
func TestUsageReadsAsOneEntryPerOption(t *testing.T) {
	h, err := manpage.Parse(Usage())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"--elastic string":         "env EASYSCALE_ELASTIC",
		"--logical-workers string": "(default: set at the first start)",
		"--determinism string":     `(default "d1")`,
		"--speeds string":          "(default: the site's table)",
	}
	for _, b := range h.Blocks {
		if b.Kind != manpage.Entry {
			continue
		}
		if end, ok := want[b.Term]; ok {
			if n := len(b.Text); n < len(end) || b.Text[n-len(end):] != end {
				t.Errorf("%s: %q, want the whole description, ending %q", b.Term, b.Text, end)
			}
			delete(want, b.Term)
		}
	}
	for term := range want {
		t.Errorf("%s is not an entry of the parsed help:\n%s", term, Usage())
	}
}
