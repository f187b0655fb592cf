package testserver

import (
	"testing"

	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// ClusterMasters is how many masters StartRedisCluster starts: the fewest
// Redis Cluster accepts.
const ClusterMasters = 3

// RedisCluster is a Redis Cluster of redis-server processes started for a
// test: ClusterMasters masters, no replicas.
type RedisCluster struct {
	*redisproc.Cluster
}

// StartRedisCluster starts a Redis Cluster on free loopback ports with
// persistence off, and stops it when the test (or benchmark) ends.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	c, err := redisproc.StartCluster(t.TempDir(), ClusterMasters)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return &RedisCluster{Cluster: c}
}
