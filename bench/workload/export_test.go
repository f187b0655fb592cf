package workload

import "context"

var (
	ParseCommandStats = parseCommandStats
	ParseCPU          = parseCPU
	ParseBenchmarkCSV = parseBenchmarkCSV
	Fairness          = fairness
)

// WarmUp is warmUp with one Locker, for tests.
func WarmUp(ctx context.Context, lk Locker, prefix string, workers int) error {
	return warmUp(ctx, []Locker{lk}, prefix, workers)
}
