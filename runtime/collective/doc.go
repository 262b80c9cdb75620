// Package collective is the all-reduce of EasyScale's multi-process runtime:
// P processes on a TCP ring compute, bit for bit, the gradient the
// in-process runtime computes (runtime/trainer's canonicalReduce), whatever
// P is and however the job's N logical workers (ESTs) are spread over the
// processes.
//
// # Why a chain and not a ring all-reduce
//
// Float32 addition is not associative, so the result is fixed only if every
// element is summed in one order, g_0 + g_1 + … + g_{N-1} (EasyScale, arXiv
// 2208.14228, §3.3: the reduction must not depend on the placement). A
// classic ring reduce-scatter starts each segment's sum at a different rank,
// which reorders the additions per segment. Here the ranks hold contiguous
// EST ranges in rank order and the partial sum travels once along the chain
// 0 → 1 → … → P-1, each rank adding its ESTs in order; the last rank scales
// and the result travels on along the ring, P-1 → 0 → … → P-2:
//
//	          reduce (partial sums)                 broadcast (result)
//	rank 0 ──────► rank 1 ──────► … ──────► rank P-1 ──────► rank 0 ──► … ──► rank P-2
//	g_0+…          +g_k+…                   +…+g_{N-1}, ×scale
//
// Only ring links (rank r → r+1 mod P) are used, one TCP connection each.
// The vector is cut into chunks (Options.ChunkBytes) that are pipelined:
// while rank r adds chunk k, it receives chunk k+1 and sends chunk k-1, so
// a 25 MB gradient streams instead of waiting hop by hop.
//
// # Link load
//
// For a vector of S bytes the link r → r+1 carries the partial (S) for r <
// P-1 and the result (S) for r ≠ P-2: ≈2S on links 0→1 … P-3→P-2, S on
// P-2→P-1 and P-1→0. With links of bandwidth B and full pipelining the
// all-reduce takes T ≈ 2S/B for P ≥ 3 and S/B for P = 2, so the bus
// bandwidth in NCCL's definition, S/T · 2(P-1)/P, is (P-1)/P · B for P ≥ 3
// and B for P = 2 (a ring reduce-scatter/all-gather reaches B for all P, at
// the price of the order of additions). Ranks holding no EST only forward;
// P = 1 is a local computation.
//
// # Failures
//
// Every read and write on a link must progress within Options.Timeout. A
// dead peer (closed or reset connection) fails its neighbours at once, a
// stalled one after the timeout; the failing rank closes both its links,
// which fails its neighbours in turn, so every member's AllReduce (this call
// or the next) returns an error instead of hanging. The ring is then broken
// and the runtime rebuilds it with the surviving members (a new Epoch).
//
// # Authentication
//
// Connect authenticates both links of a rank with runtime/auth (the job
// secret, role "ring") and then checks a hello (epoch, ranks, size, chunk
// size); a connection failing either is refused, logged and not counted.
package collective
