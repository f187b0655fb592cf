package testserver

import (
	"testing"

	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
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
	return &RedisCluster{Cluster: started(t, c, err)}
}

// StartRedisClusterTLS starts a Redis Cluster as StartRedisCluster does,
// whose nodes speak TLS only, to clients and to each other, with the
// certificates of certs (see StartRedisTLS). Its URL is rediss:// with
// ca_file, cert_file and key_file.
func StartRedisClusterTLS(t testing.TB, certs *testcerts.Set, authClients bool) *RedisCluster {
	t.Helper()
	c, err := redisproc.StartClusterTLS(t.TempDir(), ClusterMasters, RedisTLS(certs, authClients))
	return &RedisCluster{Cluster: started(t, c, err)}
}
