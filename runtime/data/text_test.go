package data

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNewTextCorpusBuildsASortedVocabularyAndSplit(t *testing.T) {
	text := []byte("hello world, hello go!\n")
	c, err := NewTextCorpus(text)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(c.Vocab) || string(c.Vocab) != "\n !,deghlorw" {
		t.Fatalf("vocab %q, want the sorted distinct bytes", c.Vocab)
	}
	if c.VocabSize() != 12 {
		t.Fatalf("VocabSize = %d", c.VocabSize())
	}
	if got := c.Decode(c.IDs); got != string(text) {
		t.Fatalf("Decode(IDs) = %q", got)
	}
	// 23 bytes: the test part is the last 23/10 = 2.
	if len(c.Train) != 21 || len(c.Test) != 2 || c.Decode(c.Test) != "!\n" {
		t.Fatalf("split %d/%d, test %q", len(c.Train), len(c.Test), c.Decode(c.Test))
	}
	ids, err := c.Encode([]byte("go, world"))
	if err != nil || c.Decode(ids) != "go, world" {
		t.Fatalf("Encode round trip: %v %q", err, c.Decode(ids))
	}
	if _, err := c.Encode([]byte("xyz")); err == nil || !strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("Encode of unknown bytes: %v", err)
	}
	if c.Decode([]int32{-1, 99}) != "\uFFFD\uFFFD" {
		t.Fatal("out-of-vocabulary ids not replaced")
	}
	if _, err := NewTextCorpus(nil); err == nil {
		t.Fatal("empty text accepted")
	}
}

func TestWindowsShiftTargetsByOne(t *testing.T) {
	ids := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	cases := []struct {
		name       string
		t          int
		n          int
		i          int
		in, target []int32
	}{
		{"windows of three: sample 0", 3, 3, 0, []int32{0, 1, 2}, []int32{1, 2, 3}},
		{"windows of three: the last sample uses the final id as target", 3, 3, 2, []int32{6, 7, 8}, []int32{7, 8, 9}},
		{"windows of nine fit exactly once", 9, 1, 0, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8}, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NumWindows(ids, tc.t); got != tc.n {
				t.Fatalf("NumWindows = %d, want %d", got, tc.n)
			}
			in, tg := Window(ids, tc.t, tc.i)
			if !slices.Equal(in, tc.in) || !slices.Equal(tg, tc.target) {
				t.Fatalf("Window = %v, %v; want %v, %v", in, tg, tc.in, tc.target)
			}
			if cap(in) != tc.t {
				t.Fatalf("inputs capacity %d lets an append overwrite the targets", cap(in))
			}
		})
	}
	if NumWindows(ids, 10) != 0 || NumWindows(ids, 0) != 0 || NumWindows(ids[:1], 1) != 0 {
		t.Fatal("NumWindows counts windows that do not fit")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Window past the end did not panic")
		}
	}()
	Window(ids, 3, 3)
}

func TestLoadTextErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"a missing file names the path", filepath.Join(dir, "nope.txt"), "nope.txt"},
		{"an empty file is refused", empty, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadText(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
