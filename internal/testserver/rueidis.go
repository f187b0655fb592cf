package testserver

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// rueidisTimers are the goroutines a rueidis cluster client leaves
// running once closed: its topology refresh, and the close of surplus
// connections five seconds after it learnt the topology (two of its
// initial addresses answered at once). They end by themselves.
var rueidisTimers = []string{
	"rueidis.(*clusterClient)._refresh.func",
	"rueidis.(*clusterClient).redirectOrNew.func",
}

// AwaitRueidisTimers waits, for 10 s at most, until no goroutine runs a
// timer a closed rueidis cluster client left behind, nor one of the
// functions named in more, so that a package's leak check at exit sees
// only real leaks. Tests call it in a Cleanup registered before their
// clients', so that it runs after those closed.
func AwaitRueidisTimers(t testing.TB, more ...string) {
	funcs := slices.Concat(rueidisTimers, more)
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.Stack(buf, true)
		if n == len(buf) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		stacks := string(buf[:n])
		if !slices.ContainsFunc(funcs, func(f string) bool { return strings.Contains(stacks, f) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Log("rueidis timers still running after 10s")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
