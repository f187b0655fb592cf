package workload

import "time"

// Suite returns the standard workloads, in the order a run goes through
// them:
//
//   - "uncontended": every acquisition on a distinct random key, on one
//     server, with 1, 16, 64 and 256 workers;
//   - "contended-8" and "contended-1": 64 workers on 8 hot keys and on
//     one, each acquisition released at once;
//   - "redlock-5": 64 workers, distinct keys, a Redlock of 5 servers;
//   - "herd": waiters workers on one key, each holding it for hold, in
//     this process and spread over 10 child processes.
func Suite(waiters int, hold time.Duration) []Workload {
	var s []Workload
	for _, c := range []int{1, 16, 64, 256} {
		s = append(s, Workload{Name: "uncontended", Concurrency: c, Nodes: 1})
	}
	return append(s,
		Workload{Name: "contended-8", Concurrency: 64, HotKeys: 8, Nodes: 1},
		Workload{Name: "contended-1", Concurrency: 64, HotKeys: 1, Nodes: 1},
		Workload{Name: "redlock-5", Concurrency: 64, Nodes: 5},
		Workload{Name: "herd", Concurrency: waiters, HotKeys: 1, Hold: hold, Nodes: 1},
		Workload{Name: "herd", Concurrency: waiters, HotKeys: 1, Hold: hold, Nodes: 1, Processes: 10},
	)
}
