// Package vecf32 holds the element-wise float32 kernels of the gradient
// reduction (runtime/collective's chain, runtime/trainer's in-process
// canonical reduction): dst += src, dst = (dst + src) × s and dst ×= s.
//
// Each element is one IEEE-754 single-precision addition or product,
// correctly rounded, so the result does not depend on how many lanes
// compute at once: the AVX2 kernels (amd64 machines that have AVX2, 32
// elements per iteration) give exactly the bits of the scalar loops (every
// other machine, and the tails), NaN payloads included — VADDPS and VMULPS
// propagate their first source operand's NaN as ADDSS and MULSS do, and dst
// is that operand. Nothing is fused: (dst + src) × s rounds twice.
package vecf32
