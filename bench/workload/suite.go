package workload

import "time"

// SideBySide returns the workloads of the side-by-side comparison of
// turnstile with the other Go Redis lock libraries (the bench command),
// in the order a run goes through them:
//
//   - "uncontended": every acquisition on a distinct random key, on one
//     server, with 1, 16, 64 and 256 workers;
//   - "redlock-5": distinct keys on a Redlock of 5 servers, with 1 and
//     64 workers;
//   - "cluster-3": distinct keys on a Redis Cluster of 3 masters, with
//     64 and 256 workers, for the libraries that run on a cluster: set
//     beside "uncontended" at the same workers, it shows whether
//     throughput grows with masters (render.ScaleOuts);
//   - "contended-8" and "contended-1": 64 workers of one client on 8 hot
//     keys (one picked at random per acquisition) and on one, each lock
//     released at once;
//   - "contended-1" with the 64 workers spread over 8 clients;
//   - "herd": waiters workers on one key, each holding it for hold, in
//     one client, spread over 10 clients in this process, and spread
//     over 10 child processes (a client each).
//
// waiters must be a multiple of 10.
func SideBySide(waiters int, hold time.Duration) []Workload {
	var s []Workload
	for _, c := range []int{1, 16, 64, 256} {
		s = append(s, Workload{Name: "uncontended", Concurrency: c, Nodes: 1})
	}
	herd := Workload{Name: "herd", Concurrency: waiters, HotKeys: 1, Hold: hold, Nodes: 1}
	clients, procs := herd, herd
	clients.Clients, procs.Processes = 10, 10
	return append(s,
		Workload{Name: "redlock-5", Concurrency: 1, Nodes: 5},
		Workload{Name: "redlock-5", Concurrency: 64, Nodes: 5},
		Workload{Name: "cluster-3", Concurrency: 64, Nodes: 3, Cluster: true},
		Workload{Name: "cluster-3", Concurrency: 256, Nodes: 3, Cluster: true},
		Workload{Name: "contended-8", Concurrency: 64, HotKeys: 8, Nodes: 1},
		Workload{Name: "contended-1", Concurrency: 64, HotKeys: 1, Nodes: 1},
		Workload{Name: "contended-1", Concurrency: 64, HotKeys: 1, Nodes: 1, Clients: 8},
		herd, clients, procs,
	)
}

// Suite returns the standard workloads of one library, each in one
// client, in the order a run goes through them:
//
//   - "uncontended": every acquisition on a distinct random key, on one
//     server, with 1, 16, 64 and 256 workers;
//   - "contended-8" and "contended-1": 64 workers on 8 hot keys and on
//     one, each acquisition released at once;
//   - "redlock-5": 64 workers, distinct keys, a Redlock of 5 servers;
//   - "herd": waiters workers on one key, each holding it for hold, in
//     this process and spread over 10 child processes.
//
// SideBySide has these and more.
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

// NativeRecipe returns the workloads that compare a store's turnstile
// backend with the store's own lock recipe (bench --store etcd,
// postgres, mysql or zookeeper), each in one client, on one server:
//
//   - "uncontended": distinct random keys with 1, 16 and 64 workers;
//   - "contended-1": 64 workers on one hot key, each lock released at
//     once.
func NativeRecipe() []Workload {
	var s []Workload
	for _, c := range []int{1, 16, 64} {
		s = append(s, Workload{Name: "uncontended", Concurrency: c, Nodes: 1})
	}
	return append(s, Workload{Name: "contended-1", Concurrency: 64, HotKeys: 1, Nodes: 1})
}
