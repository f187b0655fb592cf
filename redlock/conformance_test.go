package redlock_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/driver"
	"github.com/turnstilelock/turnstile/locktest"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/redlock"
)

// TestConformance runs the conformance suite on Redlocks of 3 and 5 real
// redis-server processes. The servers were started just now, so the
// restart quarantine is off here; restart_test.go covers it. The
// instances the suite asks for share one connection per server, as the
// Clients of one process would: dialling five servers takes longer than
// the drift allowance of the suite's timing cases, which start their
// clocks before asking for a backend. The node timeout is raised from
// 50 ms to 500 ms: the suite drives 64 goroutines through one lock, and
// under the race detector on a small machine a whole process stalls for
// longer than 50 ms now and then; a node timeout is a failure the suite
// does not expect (fault_test.go checks the 50 ms default).
func TestConformance(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(strconv.Itoa(n)+"-nodes", func(t *testing.T) {
			srvs := startNodes(t, n)
			conns := redisNodes(t, srvs)
			locktest.Run(t, locktest.Harness{
				New: func(t testing.TB) driver.Backend {
					b, err := redlock.New(conns, redlock.WithNodeTimeout(conformanceNodeTimeout))
					if err != nil {
						t.Fatal(err)
					}
					return b
				},
				URL:   redlockURL(srvs, "quarantine=0&node_timeout="+conformanceNodeTimeout.String()),
				Evict: func(t testing.TB, key string) { evictAll(t, srvs, key) },
			})
		})
	}
}

const conformanceNodeTimeout = 500 * time.Millisecond

// TestConformanceMemory runs the suite on a Redlock of in-process nodes:
// the quorum logic without a network.
func TestConformanceMemory(t *testing.T) {
	nodes := []*memory.Backend{memory.New(), memory.New(), memory.New()}
	locktest.Run(t, locktest.Harness{
		New: func(t testing.TB) driver.Backend {
			// In-process nodes always answer; a generous node timeout keeps
			// a goroutine descheduled on a loaded machine (-race, other
			// packages' servers) from counting as a silent node.
			b, err := redlock.New([]driver.Backend{nodes[0], nodes[1], nodes[2]}, redlock.WithNodeTimeout(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Evict: func(_ testing.TB, key string) {
			for _, n := range nodes {
				n.Evict(key)
			}
		},
	})
}
