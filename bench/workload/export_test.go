package workload

var (
	ParseCommandStats = parseCommandStats
	ParseBenchmarkCSV = parseBenchmarkCSV
	Fairness          = fairness
)
