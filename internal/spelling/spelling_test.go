package spelling

import (
	"fmt"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"partition", "partiton", 1},
		{"poll_interval", "poll_intervall", 1}, {"kitten", "sitting", 3}, {"gpu", "gpu", 0},
		{"größe", "grosse", 3}, // runes, not bytes: ö → o, ß → s, one s more
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func ExampleDistance() {
	fmt.Println(Distance("partiton", "partition"))
	// Output: 1
}
