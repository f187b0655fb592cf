package zookeeper_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/zookeeper/internal/zk"
)

// TestWatchesSurviveReconnects cuts the connection of a session that has
// watches set, again and again. After each reconnection the client sends
// the watches again (with the last zxid it saw) while the new
// connection's first replies come in; under -race any unsynchronised
// access there fails the test. The watches must still fire afterwards.
func TestWatchesSurviveReconnects(t *testing.T) {
	const n = 1000
	p := startProxy(t, srv.Addr())
	sessions := make(chan struct{}, 1)
	// The proxy twice: a client that has tried every server in turn
	// waits a second before the next round, and that would be after
	// every cut with one server.
	c, _, err := zk.Connect([]string{p.Addr(), p.Addr()}, 20*time.Second,
		zk.WithLogger(quiet{}), zk.WithLogInfo(false),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				select {
				case sessions <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitSession := func(what string) {
		t.Helper()
		select {
		case <-sessions:
		case <-time.After(30 * time.Second):
			t.Fatalf("no session %s", what)
		}
	}
	waitSession("at first")
	id := c.SessionID()

	other := rawConn(t)
	const dir = "/reconnect-watches"
	data, absent, kids := dir+"/data", dir+"/absent", dir+"/kids"
	for _, path := range []string{dir, data, kids} {
		if _, err := other.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
	}
	if err := other.Delete(absent, -1); err != nil && err != zk.ErrNoNode {
		t.Fatal(err)
	}
	_, _, onData, err := c.GetW(data)
	if err != nil {
		t.Fatal(err)
	}
	ok, _, onAbsent, err := c.ExistsW(absent)
	if err != nil || ok {
		t.Fatalf("ExistsW(%s) = %v, %v", absent, ok, err)
	}
	_, _, onKids, err := c.ChildrenW(kids)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	for i := range n {
		p.drop()
		waitSession("after cut " + strconv.Itoa(i+1))
		// A reply on the new connection, which the client reads as it
		// sends the watches again.
		if _, _, err := c.Exists(data); err != nil {
			t.Fatalf("Exists after cut %d: %v", i+1, err)
		}
	}
	t.Logf("%d reconnections in %v", n, time.Since(start).Round(time.Millisecond))
	if got := p.accepted.Load(); got != n+1 {
		t.Fatalf("the proxy forwarded %d connections, want %d: one, then one after each cut", got, n+1)
	}
	if got := c.SessionID(); got != id {
		t.Fatalf("session %x became %x: it expired during the reconnections", id, got)
	}

	if _, err := other.Set(data, []byte("changed"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create(absent, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create(kids+"/k", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name string
		ch   <-chan zk.Event
		want zk.EventType
	}{
		{"GetW(" + data + ")", onData, zk.EventNodeDataChanged},
		{"ExistsW(" + absent + ")", onAbsent, zk.EventNodeCreated},
		{"ChildrenW(" + kids + ")", onKids, zk.EventNodeChildrenChanged},
	} {
		select {
		case ev := <-w.ch:
			if ev.Type != w.want || ev.Err != nil {
				t.Errorf("%s: event %v (%v), want %v", w.name, ev.Type, ev.Err, w.want)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s never fired after %d reconnections", w.name, n)
		}
	}
}

// TestCloseWithRequestsInFlight closes clients while their requests are
// on their way, again and again. A request that the close answers
// (ErrConnectionClosed) must be answered once, and its reply, if the
// server's still comes in, must not be decoded into what the caller
// reads, nor its watch be added meanwhile: under -race any such write
// fails the test. Every call returns, and a reply the caller got is whole.
func TestCloseWithRequestsInFlight(t *testing.T) {
	const rounds, callers = 60, 8
	const dir = "/close-in-flight"
	other := rawConn(t)
	if _, err := other.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	calls := []func(c *zk.Conn, i int) error{
		func(c *zk.Conn, i int) error {
			p, err := c.CreateContainer(dir+"/c"+strconv.Itoa(i%4), nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
			if err == nil && p == "" {
				return errors.New("CreateContainer: no path")
			}
			return err
		},
		func(c *zk.Conn, _ int) error {
			_, st, err := c.Children(dir)
			if err == nil && st.Czxid == 0 {
				return errors.New("Children: no stat")
			}
			return err
		},
		func(c *zk.Conn, _ int) error {
			_, st, _, err := c.ChildrenW(dir)
			if err == nil && st.Czxid == 0 {
				return errors.New("ChildrenW: no stat")
			}
			return err
		},
		func(c *zk.Conn, _ int) error {
			_, st, _, err := c.GetW(dir)
			if err == nil && st.Czxid == 0 {
				return errors.New("GetW: no stat")
			}
			return err
		},
		func(c *zk.Conn, i int) error {
			_, err := c.Multi(&zk.CheckVersionRequest{Path: dir, Version: -1})
			return err
		},
	}
	for round := range rounds {
		c, _, err := zk.Connect([]string{srv.Addr()}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		started := make(chan struct{}, callers)
		for g := range callers {
			wg.Go(func() {
				for i := 0; ; i++ {
					err := calls[(g+i)%len(calls)](c, i)
					if i == 0 {
						started <- struct{}{}
					}
					switch {
					case err == nil, errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoServer):
					case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrClosing), errors.Is(err, zk.ErrSessionExpired):
						return
					default:
						errs <- err
						return
					}
				}
			})
		}
		for range callers {
			<-started
		}
		// Closed at a different point of the callers' requests each round.
		time.Sleep(time.Duration(round%7) * 200 * time.Microsecond)
		c.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: calls still waiting 30 s after Close", round)
		}
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
