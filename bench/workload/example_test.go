package workload_test

import (
	"context"
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile/bench/workload"
)

// Run one cell: 64 workers taking locks on distinct keys through
// turnstile, for three seconds, against a redis-server on port 6379.
func ExampleRun() {
	res, err := workload.Run(context.Background(), workload.Cell{
		Workload: workload.Workload{Name: "uncontended", Concurrency: 64, Nodes: 1},
		Library:  workload.Turnstile(),
		Addrs:    []string{"127.0.0.1:6379"},
		Duration: 3 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.0f pairs/s, p99 %.0f µs, %.1f commands per acquisition\n", res.PerSecond, res.P99Micros, res.CommandsPerAcq)
}

// The standard workloads, by id.
func ExampleSuite() {
	for _, w := range workload.Suite(2000, time.Millisecond) {
		fmt.Println(w.ID())
	}
	// Output:
	// uncontended/c=1
	// uncontended/c=16
	// uncontended/c=64
	// uncontended/c=256
	// contended-8/c=64
	// contended-1/c=64
	// redlock-5/c=64
	// herd/c=2000
	// herd/c=2000/procs=10
}

// The side-by-side comparison's workloads, by id.
func ExampleSideBySide() {
	for _, w := range workload.SideBySide(500, time.Millisecond) {
		fmt.Println(w.ID())
	}
	// Output:
	// uncontended/c=1
	// uncontended/c=16
	// uncontended/c=64
	// uncontended/c=256
	// redlock-5/c=1
	// redlock-5/c=64
	// cluster-3/c=64
	// cluster-3/c=256
	// contended-8/c=64
	// contended-1/c=64
	// contended-1/c=64/clients=8
	// herd/c=500
	// herd/c=500/clients=10
	// herd/c=500/procs=10
}
