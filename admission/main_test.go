package admission_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/admission"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newClient returns a rueidis client of the test's own, closed when it
// ends: one per simulated instance.
func newClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func newRedis(t testing.TB, srv *testserver.Redis, limit admission.Limit, opts ...admission.Option) *admission.Redis {
	t.Helper()
	a, err := admission.NewRedis(newClient(t, srv.Addr()), limit, opts...)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	return a
}

// ctxFor returns a context that ends after d, or when the test ends.
var ctxFor = testserver.Ctx

// scriptRuns returns how many times the server ran a script
// (EVAL or EVALSHA) since its statistics were last reset.
func scriptRuns(t testing.TB, srv *testserver.Redis) int {
	t.Helper()
	n := 0
	for line := range strings.SplitSeq(srv.MustDo(t, "INFO", "commandstats"), "\n") {
		line = strings.TrimSpace(line)
		for _, cmd := range []string{"cmdstat_eval:", "cmdstat_evalsha:"} {
			rest, ok := strings.CutPrefix(line, cmd)
			if !ok {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			v, err := strconv.Atoi(calls)
			if err != nil {
				t.Fatalf("commandstats line %q: %v", line, err)
			}
			n += v
		}
	}
	return n
}
