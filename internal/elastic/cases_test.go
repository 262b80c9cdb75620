package elastic

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// validationCase is one line of testdata/validation_cases.tsv, the table the
// C plugin is checked against too.
type validationCase struct {
	name     string
	settings Settings
	want     string // "ok MIN MAX LW DET" or "err OPTION"
}

func loadValidationCases(t *testing.T) []validationCase {
	t.Helper()
	f, err := os.Open("testdata/validation_cases.tsv")
	if err != nil {
		t.Fatalf("open case table: %v", err)
	}
	defer f.Close()
	var cases []validationCase
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		col := strings.Split(text, "\t")
		if len(col) != 5 {
			t.Fatalf("validation_cases.tsv:%d: %d columns, want 5", line, len(col))
		}
		cases = append(cases, validationCase{
			name: col[0],
			settings: Settings{
				Elastic:        tableSetting(col[1], "--"+OptionElastic),
				LogicalWorkers: tableSetting(col[2], "--"+OptionLogicalWorkers),
				Determinism:    tableSetting(col[3], "--"+OptionDeterminism),
			},
			want: col[4],
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read case table: %v", err)
	}
	return cases
}

func tableSetting(v, origin string) Setting {
	switch v {
	case "-":
		return Setting{}
	case "''":
		return Setting{Set: true, Origin: origin}
	default:
		return Setting{Set: true, Value: v, Origin: origin}
	}
}

func TestSettingsRequestFollowsTheSharedCaseTable(t *testing.T) {
	for _, tc := range loadValidationCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.settings.Request()
			got := fmt.Sprintf("ok %d %d %d %s", r.MinNodes, r.MaxNodes, r.LogicalWorkers, r.Determinism)
			var oe *OptionError
			switch {
			case errors.As(err, &oe):
				got = "err " + oe.Option
				if !strings.Contains(err.Error(), "--"+oe.Option) {
					t.Errorf("message %q does not name --%s", err, oe.Option)
				}
			case err != nil:
				t.Fatalf("error %v is not an *OptionError", err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q (err %v)", got, tc.want, err)
			}
		})
	}
}
