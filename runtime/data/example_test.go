package data_test

import (
	"bytes"
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/data"
	"github.com/easyscale/easyscale-slurm/runtime/rng"
)

// Each logical worker keeps its own Cursor; the batches it gets depend only
// on (seed, epoch, rank), never on which physical worker asks.
func ExampleSampler_Next() {
	s, err := data.NewSampler(10, 4, 42) // 10 samples, 4 logical workers
	if err != nil {
		panic(err)
	}
	fmt.Println("shard length", s.ShardLen(), "steps per epoch", s.StepsPerEpoch(2))
	var c data.Cursor // saved with the EST's context
	batch := s.Next(&c, 1, 2)
	fmt.Println(len(batch), "indices; cursor now", c)
	// Output:
	// shard length 3 steps per epoch 1
	// 2 indices; cursor now {1 0}
}

// Evaluation splits the test set without padding, so 10 samples over 4
// logical workers are counted 10 times, not 12.
func ExampleEvalShards() {
	for r, sh := range data.EvalShards(10, 4) {
		fmt.Println(r, sh.Start, sh.End)
	}
	// Output:
	// 0 0 2
	// 1 2 5
	// 2 5 7
	// 3 7 10
}

func ExampleReadIDX() {
	labels := []byte{0, 0, 8, 1, 0, 0, 0, 3, 5, 0, 4} // magic 0x801, 3 labels
	x, err := data.ReadIDX(bytes.NewReader(labels), 0)
	if err != nil {
		panic(err)
	}
	fmt.Printf("magic %#x dims %v labels %v\n", x.Magic(), x.Dims, x.Data)

	_, err = data.ReadIDX(bytes.NewReader(labels[:9]), 0)
	fmt.Println(err)
	// Output:
	// magic 0x801 dims [3] labels [5 0 4]
	// idx: payload at byte 9: have 1 of 3 bytes: unexpected EOF
}

// Augmentation draws from the logical worker's own stream for the step.
func ExampleRandomShift() {
	img := make([]float32, 28*28)
	img[14*28+14] = 1 // one lit pixel in the middle
	out := make([]float32, len(img))
	s := rng.NewStream(rng.StreamKey{Seed: 1, Worker: 0, Step: 0, Purpose: rng.Augment})
	data.RandomShift(out, img, 28, 28, 2, s)
	for i, v := range out {
		if v == 1 {
			fmt.Println("pixel moved by", i/28-14, "rows and", i%28-14, "columns")
		}
	}
	fmt.Println("draws:", s.Position())
	// Output:
	// pixel moved by 1 rows and -1 columns
	// draws: 2
}

func ExampleWindow() {
	c, err := data.NewTextCorpus([]byte("abcabcabcab"))
	if err != nil {
		panic(err)
	}
	in, target := data.Window(c.Train, 4, 1)
	fmt.Printf("%d windows; %q -> %q\n", data.NumWindows(c.Train, 4), c.Decode(in), c.Decode(target))
	// Output: 2 windows; "bcab" -> "cabc"
}
