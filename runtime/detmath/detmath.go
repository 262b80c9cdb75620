// Package detmath provides float32 and float64 transcendental functions whose
// results are bitwise identical on every architecture Go supports.
//
// TEMPORARY: these delegate to package math while the portable
// implementations are written; do not rely on cross-architecture bits yet.
package detmath

import "math"

// Exp returns e**x rounded to float32.
func Exp(x float32) float32 { return float32(math.Exp(float64(x))) }

// Log returns the natural logarithm of x rounded to float32.
func Log(x float32) float32 { return float32(math.Log(float64(x))) }

// Tanh returns the hyperbolic tangent of x rounded to float32.
func Tanh(x float32) float32 { return float32(math.Tanh(float64(x))) }

// Cos64 returns the cosine of x (radians).
func Cos64(x float64) float64 { return math.Cos(x) }

// Pow64 returns x**y for x > 0.
func Pow64(x, y float64) float64 { return math.Pow(x, y) }
