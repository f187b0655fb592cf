package etcd

import (
	"net/url"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// FuzzKindDirectory: whatever keys a kind's directory of a key holds, an
// operator's read of it never panics, counts each key under queue/ as a
// waiter, and takes as holders only the kind's holder keys, each named
// after its owner: the key's value, or the unescaped last element (as
// written when it is no escape).
func FuzzKindDirectory(f *testing.F) {
	for _, s := range []string{"holders/a", "holders/a%2Fb", "holders/%zz", "holders/", "queue/a", "writer", "readers/r", "holder", "count", "x", ""} {
		f.Add(s, "owner")
	}
	f.Fuzz(func(t *testing.T, rel, value string) {
		const dir = "/turnstile/k/"
		for _, l := range []kindLayout{semaphoreLayout, rwLayout, reentrantLayout} {
			kv := &mvccpb.KeyValue{Key: []byte(dir + rel), Value: []byte(value), ModRevision: 5, CreateRevision: 3, Lease: 9}
			hs, waiters := l.read(dir, []*mvccpb.KeyValue{kv})
			if strings.HasPrefix(rel, "queue/") {
				if waiters != 1 || len(hs) != 0 {
					t.Fatalf("%s %q: %d waiters, holders %v; want a waiter", l.kind, rel, waiters, hs)
				}
				continue
			}
			if waiters != 0 || len(hs) > 1 {
				t.Fatalf("%s %q: %d waiters, %d holders", l.kind, rel, waiters, len(hs))
			}
			if len(hs) == 0 {
				continue
			}
			owner := hs[0].owner
			if dirName, name, ok := strings.Cut(rel, "/"); ok {
				if want, err := url.PathUnescape(name); name == "" || (err == nil && owner != want) || (err != nil && owner != name) || dirName+"/" == "queue/" {
					t.Fatalf("%s %q: holder %q", l.kind, rel, owner)
				}
			} else if owner != value {
				t.Fatalf("%s %q: holder %q, want the value %q", l.kind, rel, owner, value)
			}
			st := l.state("k", hs, waiters)
			if !st.Held || st.Holders[0].Token == 0 || st.Token != st.Holders[0].Token || st.Holders[0].TTL != -1 {
				t.Fatalf("%s %q: state %+v", l.kind, rel, st)
			}
		}
	})
}
