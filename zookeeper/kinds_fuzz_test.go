package zookeeper

import (
	"strconv"
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/driver"
)

// FuzzKindNames: a lock kind's directory is one znode under the root that
// no key's plain directory can be, and a semaphore's lease name reads
// back as the owner and number of permits it was made from; any other
// name is refused or read as what it says, without a panic.
func FuzzKindNames(f *testing.F) {
	f.Add("a.b", "a", 3)
	f.Add("", ".", 1)
	f.Add("x.semaphore", "o.7", 10000)
	f.Add("%2E", "07", 0)
	f.Fuzz(func(t *testing.T, key, owner string, permits int) {
		b := &Backend{root: DefaultRoot}
		for _, kind := range []string{"reentrant", "rw", "semaphore"} {
			d := b.kindDir(key, kind)
			name, ok := strings.CutPrefix(d, DefaultRoot+"/")
			if !ok || strings.Contains(name, "/") || name == "." || name == ".." {
				t.Fatalf("key %q: %s directory %q is not one znode under %s", key, kind, d, DefaultRoot)
			}
			if k, ok := unescape(name); ok {
				t.Fatalf("the %s directory %q of key %q is the plain directory of key %q", kind, d, key, k)
			}
		}
		if permits >= 1 && permits <= driver.MaxPermits {
			n := escape(owner) + "." + strconv.Itoa(permits)
			ls, ok := parseLease(n)
			if !ok || ls.owner != escape(owner) || ls.permits != permits || ls.name != n {
				t.Fatalf("lease %q of %q with %d permits parses as %+v, %v", n, owner, permits, ls, ok)
			}
		}
		// Any child name: refused, or read as an owner and a number that
		// write it back.
		if ls, ok := parseLease(owner); ok && (ls.permits < 1 || ls.owner+"."+strconv.Itoa(ls.permits) != owner) {
			t.Fatalf("%q parses as %+v", owner, ls)
		}
	})
}
