// Package data is the input pipeline of EasyScale training jobs: the IDX
// reader and MNIST loader, the distributed sampler over logical workers, the
// random-shift augmentation, and the character corpus of the language-model
// example.
//
// Everything here is keyed by logical identity, never by physical worker:
//
//	MNIST .gz files --ReadIDX--> MNIST{Train, Test} (cached once per process)
//	                                   |
//	Sampler(N, W logical workers, seed): epoch e -> Permutation(N, seed, e)
//	    padded to ceil(N/W)*W, shard r = positions r, r+W, ...
//	    Cursor{Epoch, Pos} per logical worker -> Next -> micro-batch indices
//	                                   |
//	Normalize (pixel/255 - 0.1307)/0.3081, then RandomShift drawing from the
//	logical worker's rng stream (Purpose Augment)
//
// HashFiles gives the Manifest of the files a task reads (name, size and
// SHA-256 of each, in load order), the data's part of the job's identity;
// its digests are cached next to the data, keyed by path, size, mtime,
// ctime and inode. Finding a data set on the node (the job file's
// data.dir, $EASYSCALE_MNIST_DIR, ./data, the installed copy, the Go module
// cache) is package runtime/datasets' work: this package holds formats and
// samplers only.
//
// A logical worker's Cursor and rng stream position are its whole data
// context: saving them at a step and restoring them on any physical worker
// continues the same sequence of batches. Evaluation uses EvalShards, which
// covers every test sample exactly once.
//
// Sources: the IDX format from http://yann.lecun.com/exdb/mnist/; sampler
// semantics from PyTorch's DistributedSampler; the Opticks text ships with
// Go at $(go env GOROOT)/src/testdata/Isaac.Newton-Opticks.txt.
package data
