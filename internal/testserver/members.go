package testserver

import (
	"path/filepath"
	"testing"

	"github.com/turnstilelock/turnstile/internal/etcdproc"
	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/internal/zkproc"
)

// EtcdCluster is an etcd cluster of several members started for a test;
// each member pauses, resumes, is killed and restarts on its own (see
// proc.Member).
type EtcdCluster struct {
	*etcdproc.Cluster
}

// StartEtcdCluster starts an etcd cluster of members members on free
// loopback ports, with their data in memory where /dev/shm exists, and
// stops it when the test (or benchmark) ends. A missing binary fails the
// test with the install hint.
func StartEtcdCluster(t testing.TB, members int, opts ...etcdproc.ClusterOption) *EtcdCluster {
	t.Helper()
	c, err := etcdproc.StartCluster(etcdDataDir(t), members, opts...)
	return &EtcdCluster{Cluster: started(t, c, err)}
}

// ZooKeeperEnsemble is a replicated ZooKeeper service of several servers
// started for a test; each server pauses, resumes, is killed and
// restarts on its own (see proc.Member).
type ZooKeeperEnsemble struct {
	*zkproc.Ensemble
}

// StartZooKeeperEnsemble starts an ensemble of servers ZooKeeper servers
// on free loopback ports and stops it when the test (or benchmark) ends.
// Each server is a JVM: three take a few seconds to start.
func StartZooKeeperEnsemble(t testing.TB, servers int, opts ...zkproc.EnsembleOption) *ZooKeeperEnsemble {
	t.Helper()
	e, err := zkproc.StartEnsemble(t.TempDir(), servers, opts...)
	return &ZooKeeperEnsemble{Ensemble: started(t, e, err)}
}

// StartRedisClusterWith starts a Redis Cluster of ClusterMasters masters
// as StartRedisCluster does, changed by opts (redisproc.WithReplicas,
// WithNodeTimeout, WithClusterClocks), and stops it when the test (or
// benchmark) ends.
func StartRedisClusterWith(t testing.TB, opts ...redisproc.ClusterOption) *RedisCluster {
	t.Helper()
	c, err := redisproc.StartClusterWith(t.TempDir(), ClusterMasters, opts...)
	return &RedisCluster{Cluster: started(t, c, err)}
}

// NewClock is a wrong wall clock at offset 0 for the servers of one test
// (see proc.Clock); a missing libfaketime fails the test with the
// command that installs it.
func NewClock(t testing.TB) *proc.Clock {
	t.Helper()
	c, err := proc.NewClock(filepath.Join(t.TempDir(), "faketime"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// StartRedisWith starts redis-server as StartRedis does, changed by opts
// (redisproc.WithClock), and stops it when the test (or benchmark) ends.
func StartRedisWith(t testing.TB, opts ...redisproc.Option) *Redis {
	t.Helper()
	s, err := redisproc.StartWith(t.TempDir(), opts...)
	return &Redis{Server: started(t, s, err), t: t}
}
