package etcd

import (
	"strconv"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// FuzzReentrantCount: whatever a reentrant lock's count key holds, it
// reads as a positive number or is refused with an error naming the key,
// never a panic; numbers it accepts are the ones written.
func FuzzReentrantCount(f *testing.F) {
	for _, s := range []string{"1", "2", "0", "-1", "", "9223372036854775807", "9223372036854775808", " 1", "1e3", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, _, err := readCount("/c", []*mvccpb.KeyValue{{Key: []byte("/c"), Value: []byte(v), ModRevision: 7}})
		want, perr := strconv.ParseInt(v, 10, 64)
		switch {
		case perr == nil && want >= 1:
			if err != nil || n != want {
				t.Fatalf("count %q = %d, %v; want %d", v, n, err, want)
			}
		case err == nil:
			t.Fatalf("count %q accepted as %d", v, n)
		}
	})
}
