package workload

var (
	ParseCommandStats = parseCommandStats
	ParseCPU          = parseCPU
	ParseBenchmarkCSV = parseBenchmarkCSV
	Fairness          = fairness
)

// WarmUp is warmUp, for tests.
var WarmUp = warmUp
