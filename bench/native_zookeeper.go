package main

import (
	"path/filepath"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/workload"
	"github.com/turnstilelock/turnstile/internal/zkproc"

	_ "github.com/turnstilelock/turnstile/zookeeper" // registers zookeeper://
)

// zookeeperStore sets turnstile/zookeeper beside go-zookeeper's lock
// recipe (zk.NewLock, upstream's module: turnstile's patched copy is
// internal to its zookeeper module) on one standalone ZooKeeper server
// run as the test suite runs it (zkproc.Start): forceSync=no, its
// transaction log written but not fsynced at every commit.
var zookeeperStore = nativeStore{
	name:   "zookeeper",
	recipe: "go-zookeeper's zk.Lock",
	libraries: func() []workload.Library {
		return []workload.Library{
			workload.TurnstileOn("zookeeper", "ZooKeeper's queue of waiters, the watchdog", func(addr string) string { return "zookeeper://" + addr }),
			peers.ZooKeeperLock(),
		}
	},
	start: func(dir string) (nativeServer, error) {
		if !zkproc.Available() {
			return nativeServer{}, zkproc.ErrNotInstalled
		}
		srv, err := zkproc.Start(filepath.Join(dir, "zookeeper"))
		if err != nil {
			return nativeServer{}, err
		}
		return processServer(srv.Addr(), srv.PID(), srv.Kill,
			"a standalone ZooKeeper (Debian's package; tickTime 200 ms, forceSync=no, as the test suite runs it)",
			"ZooKeeper: its transaction log is written at every commit but not fsynced (forceSync=no).",
		), nil
	},
}
