package detmath

import "math"

// Canonical NaNs: every NaN this package returns has exactly these bits, so
// hardware differences in NaN propagation never reach a caller.
var (
	nan32 = math.Float32frombits(0x7fc00000)
	nan64 = math.Float64frombits(0x7ff8000000000001)
)

// pow2 returns 2**n for n in [-1022, 1023] by building the bits directly.
func pow2(n int) float64 { return math.Float64frombits(uint64(n+1023) << 52) }
