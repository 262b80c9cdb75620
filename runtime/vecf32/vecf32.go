package vecf32

// Add sets dst[i] = dst[i] + src[i] for i < len(dst); src must be at least
// as long as dst.
func Add(dst, src []float32) {
	src = src[:len(dst)]
	n := 0
	if useAVX2 && len(dst) >= 32 {
		n = len(dst) &^ 31
		addAVX2(&dst[0], &src[0], n)
	}
	addGo(dst[n:], src[n:])
}

// AddScale sets dst[i] = (dst[i] + src[i]) × s for i < len(dst), the sum
// rounded to float32 before the product; src must be at least as long as
// dst.
func AddScale(dst, src []float32, s float32) {
	src = src[:len(dst)]
	n := 0
	if useAVX2 && len(dst) >= 32 {
		n = len(dst) &^ 31
		addScaleAVX2(&dst[0], &src[0], n, s)
	}
	addScaleGo(dst[n:], src[n:], s)
}

// Scale sets dst[i] = dst[i] × s.
func Scale(dst []float32, s float32) {
	n := 0
	if useAVX2 && len(dst) >= 32 {
		n = len(dst) &^ 31
		scaleAVX2(&dst[0], n, s)
	}
	scaleGo(dst[n:], s)
}

func addGo(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = dst[i] + src[i]
	}
}

// addScaleGo's explicit conversion keeps the compiler from fusing the add
// and the product (Go specification, "Floating-point operators").
func addScaleGo(dst, src []float32, s float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = float32(dst[i]+src[i]) * s
	}
}

func scaleGo(dst []float32, s float32) {
	for i := range dst {
		dst[i] = dst[i] * s
	}
}
