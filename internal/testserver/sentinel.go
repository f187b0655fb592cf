package testserver

import (
	"testing"

	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// RedisSentinel is a primary, its replicas and the Sentinels watching
// them, started for a test (see redisproc.StartSentinel): every member
// can be killed, paused, resumed and restarted, and the group says which
// node the Sentinels name the primary and waits for a failover.
type RedisSentinel struct {
	*redisproc.Sentinel
	t testing.TB
}

// StartRedisSentinel starts a primary with replicas replicas and
// sentinels Sentinels (at least 2, the quorum) on free loopback ports with
// persistence off, and stops them all when the test ends. Its URL is
// redis+sentinel://s1:p1,.../MASTERSET.
func StartRedisSentinel(t testing.TB, replicas, sentinels int) *RedisSentinel {
	t.Helper()
	g, err := redisproc.StartSentinel(t.TempDir(), replicas, sentinels)
	return &RedisSentinel{Sentinel: started(t, g, err), t: t}
}

// MustPrimary is the node the Sentinels name the primary; it fails the
// test when none answers.
func (g *RedisSentinel) MustPrimary() *redisproc.Server {
	g.t.Helper()
	p, err := g.Primary()
	if err != nil {
		g.t.Fatal(err)
	}
	return p
}

// StartRedisSentinelTLS starts a group as StartRedisSentinel does whose
// members speak TLS only, to clients and to each other, with the
// certificates of certs (see StartRedisTLS). Its URL is
// rediss+sentinel:// with ca_file, cert_file and key_file.
func StartRedisSentinelTLS(t testing.TB, certs *testcerts.Set, replicas, sentinels int) *RedisSentinel {
	t.Helper()
	g, err := redisproc.StartSentinelTLS(t.TempDir(), replicas, sentinels, RedisTLS(certs, true))
	return &RedisSentinel{Sentinel: started(t, g, err), t: t}
}
