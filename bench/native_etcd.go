package main

import (
	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/etcdproc"
)

// etcdStore sets turnstile/etcd beside etcd's concurrency.Mutex, a
// session per worker, on a single-member etcd whose data directory is on
// disk (under the system's temporary directory), so that every write of
// its log is fsynced as in production.
var etcdStore = nativeStore{
	name:      "etcd",
	recipe:    "etcd's concurrency.Mutex",
	libraries: func() []workload.Library { return []workload.Library{workload.TurnstileEtcd(), peers.EtcdMutex()} },
	start: func(dir string) (nativeServer, error) {
		if !etcdproc.Available() {
			return nativeServer{}, etcdproc.ErrNotInstalled
		}
		srv, err := etcdproc.Start(dir)
		if err != nil {
			return nativeServer{}, err
		}
		return nativeServer{
			addr:  srv.Addr(),
			stats: workload.EtcdStats,
			notes: []string{
				"a single-member etcd (its data directory on disk, " + dir + ", fsync on)",
				"On etcd, server commands are the gRPC messages the member received (a lease renewal or a watch counts one each); writes are the entries committed to its log, fsyncs those of its WAL.",
			},
			stop: srv.Kill,
		}, nil
	},
}
