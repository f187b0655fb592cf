package testserver

import (
	"net"
	"sync"
	"testing"
)

// Raw accepts connections on a free loopback port until the test ends and
// writes reply to each, as a server of another protocol would; with an
// empty reply it never answers, as a hung server would. It returns the
// address.
func Raw(t testing.TB, reply string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if reply != "" {
				_, _ = c.Write([]byte(reply))
			}
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}
