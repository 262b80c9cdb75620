package data

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxTextBytes caps the size of a text corpus LoadText accepts (64 MiB).
const MaxTextBytes = 64 << 20

// TestPercent is the share of a corpus, in percent, kept at its end for
// testing.
const TestPercent = 10

// TextCorpus is a character-level corpus: its bytes mapped to ids in a sorted
// byte vocabulary, split into a training part and a test part (the last 10%).
type TextCorpus struct {
	Vocab []byte  // distinct bytes of the text in increasing order; id = index
	IDs   []int32 // the whole text as ids, len = number of bytes
	Train []int32 // IDs[:len(IDs)-len(IDs)/10]
	Test  []int32 // IDs[len(IDs)-len(IDs)/10:]
	index [256]int32
}

// LoadText reads the file at path (at most MaxTextBytes) and builds its
// corpus with NewTextCorpus.
func LoadText(path string) (*TextCorpus, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading text corpus: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxTextBytes+1))
	if err != nil {
		return nil, fmt.Errorf("loading text corpus %s: %w", path, err)
	}
	if len(b) > MaxTextBytes {
		return nil, fmt.Errorf("loading text corpus %s: larger than the %d-byte limit", path, MaxTextBytes)
	}
	c, err := NewTextCorpus(b)
	if err != nil {
		return nil, fmt.Errorf("loading text corpus %s: %w", path, err)
	}
	return c, nil
}

// NewTextCorpus builds the corpus of text: the sorted vocabulary of its
// distinct bytes, the id of every byte, and the train/test split (the last
// len/10 ids are the test part). It fails on an empty text.
func NewTextCorpus(text []byte) (*TextCorpus, error) {
	if len(text) == 0 {
		return nil, errors.New("building text corpus: the text is empty")
	}
	var seen [256]bool
	for _, b := range text {
		seen[b] = true
	}
	c := &TextCorpus{}
	for i := range c.index {
		c.index[i] = -1
	}
	for b, ok := range seen {
		if ok {
			c.index[b] = int32(len(c.Vocab))
			c.Vocab = append(c.Vocab, byte(b))
		}
	}
	c.IDs = make([]int32, len(text))
	for i, b := range text {
		c.IDs[i] = c.index[b]
	}
	split := len(c.IDs) - len(c.IDs)*TestPercent/100
	c.Train, c.Test = c.IDs[:split:split], c.IDs[split:]
	return c, nil
}

// VocabSize returns the number of distinct bytes (the model's class count).
func (c *TextCorpus) VocabSize() int { return len(c.Vocab) }

// Encode maps text to ids; a byte outside the vocabulary is an error naming
// it and its offset.
func (c *TextCorpus) Encode(text []byte) ([]int32, error) {
	ids := make([]int32, len(text))
	for i, b := range text {
		id := c.index[b]
		if id < 0 {
			return nil, fmt.Errorf("encoding text: byte %q at offset %d is not in the vocabulary", b, i)
		}
		ids[i] = id
	}
	return ids, nil
}

// Decode maps ids back to text; an id outside the vocabulary becomes U+FFFD.
func (c *TextCorpus) Decode(ids []int32) string {
	var sb strings.Builder
	sb.Grow(len(ids))
	for _, id := range ids {
		if id < 0 || int(id) >= len(c.Vocab) {
			sb.WriteRune('\uFFFD')
			continue
		}
		sb.WriteByte(c.Vocab[id])
	}
	return sb.String()
}

// NumWindows returns how many training samples of context length t the id
// sequence ids holds: floor((len(ids)-1)/t), since sample i needs ids
// [i·t, i·t+t]; 0 when t < 1 or len(ids) < 2.
func NumWindows(ids []int32, t int) int {
	if t < 1 || len(ids) < 2 {
		return 0
	}
	return (len(ids) - 1) / t
}

// Window returns sample i of context length t: inputs = ids[i·t : i·t+t] and
// targets = ids[i·t+1 : i·t+t+1] (each input's next character). Both alias
// ids. It panics unless 0 <= i < NumWindows(ids, t).
func Window(ids []int32, t, i int) (inputs, targets []int32) {
	if i < 0 || i >= NumWindows(ids, t) {
		panic(fmt.Sprintf("data: window %d of length %d outside the %d windows of %d ids", i, t, NumWindows(ids, t), len(ids)))
	}
	w := ids[i*t : i*t+t+1 : i*t+t+1]
	return w[:t:t], w[1:]
}
