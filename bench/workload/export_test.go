package workload

var (
	ParseCommandStats = parseCommandStats
	ParseCPU          = parseCPU
	ParseBenchmarkCSV = parseBenchmarkCSV
	Fairness          = fairness
)
