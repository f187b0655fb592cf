package render_test

import (
	"os"

	"github.com/turnstilelock/turnstile/bench/render"
	"github.com/turnstilelock/turnstile/bench/workload"
)

func ExampleTable() {
	r := render.Report{Cells: []workload.Result{
		{ID: "uncontended/c=64", Library: "turnstile", PerSecond: 42000, P50Micros: 900, P99Micros: 3100, P999Micros: 4800, FairMin: 640, FairMax: 680, Jain: 0.999, CommandsPerAcq: 10, ScriptsPerAcq: 2, ServerCPUMicrosPerAcq: 14.2, ServerCores: 0.6},
		{ID: "uncontended/c=64", Library: "redislock", PerSecond: 21000, P50Micros: 1800, P99Micros: 9000, P999Micros: 15000, FairMin: 300, FairMax: 350, Jain: 0.998, CommandsPerAcq: 5, ScriptsPerAcq: 1, ServerCPUMicrosPerAcq: 9.5, ServerCores: 0.2},
	}}
	_ = render.Table(os.Stdout, r)
	// Output:
	// workload          library    acq/s  p50 ms  p99 ms  p99.9 ms  fair min/max   jain  cmds/acq  scripts/acq  srv µs/acq  srv cores  gap ms  errors
	// uncontended/c=64  turnstile  42000   0.900    3.10      4.80       640/680  0.999     10.00         2.00        14.2       0.60       -       0
	// uncontended/c=64  redislock  21000    1.80    9.00      15.0       300/350  0.998      5.00         1.00         9.5       0.20       -       0
	//
	// turnstile against the fastest peer:
	//   uncontended/c=64                 42000/s vs redislock     21000/s  = 2.00x
}
