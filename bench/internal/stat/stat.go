// Package stat holds the statistics the bench module's figures are made
// of.
package stat

import "slices"

// Median returns the median of f over xs: the middle value, or the mean of
// the two middle ones for an even count; 0 for none.
func Median[T any](xs []T, f func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
