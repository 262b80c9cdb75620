package rng

import "math/bits"

// Philox4x32-10 constants from Salmon, Moraes, Dror and Shaw, "Parallel
// random numbers: as easy as 1, 2, 3", SC'11, section 3.3 and Table 2, as
// used by Random123 (philox.h), cuRAND and PyTorch.
const (
	philoxM0 = 0xD2511F53 // multiplier applied to counter word 0
	philoxM1 = 0xCD9E8D57 // multiplier applied to counter word 2
	philoxW0 = 0x9E3779B9 // key bump for key word 0 (golden ratio)
	philoxW1 = 0xBB67AE85 // key bump for key word 1 (sqrt(3)-1)
)

// philoxRounds is the round count of Philox4x32-10.
const philoxRounds = 10

// Philox4x32 returns the Philox4x32-10 block for counter ctr under key key:
// four 32-bit words, a bijection of ctr for each key. It is the generator of
// Salmon et al., SC'11 ("Parallel random numbers: as easy as 1, 2, 3"), word
// for word as in Random123's philox4x32_R(10, ctr, key) and cuRAND's
// curand_Philox4x32_10, and it reproduces Random123's published known-answer
// vectors (tests/kat_vectors). It uses only 32-bit integer arithmetic, so the
// result is the same on every architecture.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	return philoxR(philoxRounds, ctr, key)
}

// philoxR runs r rounds of Philox4x32 (r >= 1). Random123 publishes vectors
// for r = 7 and r = 10; testing both pins the round function and the key
// schedule independently of the round count.
func philoxR(r int, ctr [4]uint32, key [2]uint32) [4]uint32 {
	c0, c1, c2, c3 := ctr[0], ctr[1], ctr[2], ctr[3]
	k0, k1 := key[0], key[1]
	for i := 0; i < r; i++ {
		if i > 0 {
			k0 += philoxW0
			k1 += philoxW1
		}
		hi0, lo0 := bits.Mul32(philoxM0, c0)
		hi1, lo1 := bits.Mul32(philoxM1, c2)
		c0, c1, c2, c3 = hi1^c1^k0, lo1, hi0^c3^k1, lo0
	}
	return [4]uint32{c0, c1, c2, c3}
}
