package peers_test

import (
	"context"
	"fmt"
	"time"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/workload"
)

// Run the same cell through turnstile and every peer, against a
// redis-server on port 6379.
func ExampleAll() {
	libs := append([]workload.Library{workload.Turnstile()}, peers.All()...)
	for _, lib := range libs {
		res, err := workload.Run(context.Background(), workload.Cell{
			Workload: workload.Workload{Name: "contended-8", Concurrency: 64, HotKeys: 8, Nodes: 1},
			Library:  lib,
			Addrs:    []string{"127.0.0.1:6379"},
			Duration: 3 * time.Second,
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%-12s %8.0f acq/s  p99 %6.0f µs\n", res.Library, res.PerSecond, res.P99Micros)
	}
}
