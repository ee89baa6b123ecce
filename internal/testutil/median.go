package testutil

import "sort"

// Median is the middle of v (sorted in place; the upper middle for an even
// count), 0 for none: what the latency benchmarks report.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[len(v)/2]
}
