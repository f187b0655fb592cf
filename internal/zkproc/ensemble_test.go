package zkproc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/internal/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// zkSession is a session with one ZooKeeper server over ZooKeeper's wire
// protocol, just enough to create a node and read one back.
type zkSession struct {
	conn net.Conn
	xid  int32
}

func dialSession(addr string) (*zkSession, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId,
	// passwd (length-prefixed).
	req := make([]byte, 4+8+4+8+4+16)
	binary.BigEndian.PutUint32(req[12:], 4000)
	binary.BigEndian.PutUint32(req[24:], 16)
	z := &zkSession{conn: conn}
	resp, err := z.roundTrip(req)
	if err == nil && (len(resp) < 16 || binary.BigEndian.Uint64(resp[8:]) == 0) {
		err = errors.New("no session granted")
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return z, nil
}

func (z *zkSession) roundTrip(body []byte) ([]byte, error) {
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := z.conn.Write(append(frame, body...)); err != nil {
		return nil, err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(z.conn, hdr[:]); err != nil {
		return nil, err
	}
	resp := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	_, err := io.ReadFull(z.conn, resp)
	return resp, err
}

func appendString(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}

// call sends request op with body and returns the reply's error code and
// body.
func (z *zkSession) call(op int32, body []byte) (int32, []byte, error) {
	z.xid++
	req := binary.BigEndian.AppendUint32(nil, uint32(z.xid))
	req = binary.BigEndian.AppendUint32(req, uint32(op))
	resp, err := z.roundTrip(append(req, body...))
	if err != nil {
		return 0, nil, err
	}
	if len(resp) < 16 {
		return 0, nil, fmt.Errorf("short reply of %d bytes", len(resp))
	}
	return int32(binary.BigEndian.Uint32(resp[12:])), resp[16:], nil
}

// create makes a persistent node path holding data, open to everyone.
func (z *zkSession) create(path, data string) error {
	b := appendString(nil, path)
	b = appendString(b, data)
	b = binary.BigEndian.AppendUint32(b, 1)  // one ACL:
	b = binary.BigEndian.AppendUint32(b, 31) // every permission
	b = appendString(b, "world")
	b = appendString(b, "anyone")
	b = binary.BigEndian.AppendUint32(b, 0) // persistent
	code, _, err := z.call(1, b)
	if err == nil && code != 0 {
		err = fmt.Errorf("create %s: error %d", path, code)
	}
	return err
}

// get reads the data of node path and the time it was created, by the
// clock of the leader that created it.
func (z *zkSession) get(path string) (string, time.Time, error) {
	code, resp, err := z.call(4, append(appendString(nil, path), 0))
	if err != nil {
		return "", time.Time{}, err
	}
	if code != 0 || len(resp) < 4 {
		return "", time.Time{}, fmt.Errorf("get %s: error %d", path, code)
	}
	n := int(binary.BigEndian.Uint32(resp))
	// The data, then the Stat: czxid, mzxid, ctime (ms), ...
	if n > len(resp)-4-24 {
		return "", time.Time{}, fmt.Errorf("get %s: bad data length %d", path, n)
	}
	ctime := int64(binary.BigEndian.Uint64(resp[4+n+16:]))
	return string(resp[4 : 4+n]), time.UnixMilli(ctime), nil
}

func (z *zkSession) close() { z.conn.Close() }

// create makes node path through the server at addr.
func create(addr, path, data string) error {
	z, err := dialSession(addr)
	if err != nil {
		return err
	}
	defer z.close()
	return z.create(path, data)
}

func TestEnsembleSurvivesItsLeader(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	e, err := StartEnsemble(t.TempDir(), 3, WithClocks())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Kill)
	if want := "zookeeper://" + strings.Join(e.Addrs(), ","); e.URL() != want || strings.Count(e.ConnectString(), ",") != 2 {
		t.Fatalf("URL = %q, ConnectString = %q", e.URL(), e.ConnectString())
	}
	old, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	follower := (old + 1) % 3
	if mode, err := e.Members()[follower].Mode(); err != nil || mode != "follower" {
		t.Fatalf("server %d: mode %q, %v; want follower", follower+1, mode, err)
	}
	// The leader's clock is an hour ahead: the node it creates says so
	// (a node's ctime is the leader's wall clock).
	if err := e.Members()[old].Clock().Set(time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := create(e.Members()[follower].Addr(), "/before", "1"); err != nil {
		t.Fatal(err)
	}

	// The leader crashes: the other two elect one of themselves and take
	// writes.
	e.Members()[old].Kill()
	var leader int
	proctest.Eventually(t, 60*time.Second, "a new leader", func() error {
		var err error
		leader, err = e.Leader()
		return err
	})
	if leader == old {
		t.Fatalf("the killed server %d still leads", old+1)
	}
	proctest.Eventually(t, 30*time.Second, "a create without the old leader", func() error {
		return create(e.Members()[leader].Addr(), "/during", "2")
	})

	// The old leader comes back with its data directory and rejoins the
	// quorum, with the node created while it was down.
	if err := e.Members()[old].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if mode, err := e.Members()[old].Mode(); err != nil || (mode != "follower" && mode != "leader") {
		t.Fatalf("restarted server %d: mode %q, %v; want follower (or leader after another election)", old+1, mode, err)
	}
	z, err := dialSession(e.Members()[old].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer z.close()
	for path, want := range map[string]struct {
		data string
		skew time.Duration
	}{"/before": {"1", time.Hour}, "/during": {"2", 0}} {
		got, ctime, err := z.get(path)
		if err != nil || got != want.data {
			t.Fatalf("get %s from the restarted server = %q, %v; want %q", path, got, err, want.data)
		}
		// The node was created a few seconds ago, by a clock want.skew
		// ahead.
		if skew := time.Until(ctime); skew < want.skew-5*time.Minute || skew > want.skew+time.Second {
			t.Fatalf("%s was created %v ahead of now, want about %v", path, skew, want.skew)
		}
	}
}

func TestStartEnsembleRefusesBadInput(t *testing.T) {
	for _, n := range []int{0, -1, MaxEnsembleServers + 1} {
		if _, err := StartEnsemble(t.TempDir(), n); err == nil {
			t.Errorf("StartEnsemble with %d servers: no error", n)
		}
	}
}

// testLinks are TCP forwarders between the servers of an ensemble, one
// per pair and port, which can cut a server off from the others. A
// connection is tracked under its pair of servers, (from, to).
type testLinks struct {
	proctest.Links[[2]int]
	cut  int            // the server cut off, or -1
	used map[[2]int]int // connections forwarded, by (from, to)
}

func newTestLinks() *testLinks {
	return &testLinks{cut: -1, used: map[[2]int]int{}}
}

func (l *testLinks) link(from, to int, addr string) (string, error) {
	return l.Listen(func(c net.Conn) {
		l.Forward(c, addr, nil, func() ([2]int, bool, bool) {
			if l.cut == from || l.cut == to {
				return [2]int{}, false, false
			}
			l.used[[2]int{from, to}]++
			return [2]int{from, to}, true, true
		})
	})
}

// isolate cuts server i off from the others: its links' connections are
// closed and new ones refused.
func (l *testLinks) isolate(i int) {
	l.Lock()
	defer l.Unlock()
	l.cut = i
	l.Drop(func(pair [2]int) bool { return pair[0] == i || pair[1] == i })
}

func (l *testLinks) uses(from, to int) int {
	l.Lock()
	defer l.Unlock()
	return l.used[[2]int{from, to}]
}

// TestEnsembleThroughLinks: the servers of an ensemble started WithLinks
// dial each other's ports through the links (a follower its leader's
// quorum port; these links do not rewrite the election address, so a
// server may still dial another's election port back directly), so that
// cutting the leader's links makes the two others elect one of
// themselves while the old leader still runs.
func TestEnsembleThroughLinks(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	links := newTestLinks()
	t.Cleanup(links.Close)
	e, err := StartEnsemble(t.TempDir(), 3, WithLinks(links.link))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Kill) // runs before links.Close
	old, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		// A follower dials its leader's quorum port.
		if i != old && links.uses(i, old) == 0 {
			t.Errorf("no connection from follower %d to leader %d through its link", i+1, old+1)
		}
	}
	if err := create(e.Members()[old].Addr(), "/before", "1"); err != nil {
		t.Fatal(err)
	}
	links.isolate(old)
	var leader int
	proctest.Eventually(t, 60*time.Second, "a new leader without the cut-off one", func() error {
		leader = -1
		for i, s := range e.Members() {
			if mode, err := s.Mode(); err == nil && mode == "leader" && i != old {
				leader = i
			}
		}
		if leader < 0 {
			return errors.New("none of the two others leads")
		}
		return nil
	})
	proctest.Eventually(t, 30*time.Second, "a create without the cut-off server", func() error {
		return create(e.Members()[leader].Addr(), "/during", "2")
	})
	if e.Members()[old].PID() == 0 {
		t.Fatalf("the cut-off server %d is not running", old+1)
	}
}

func TestStartEnsembleRefusesABadLink(t *testing.T) {
	for name, link := range map[string]LinkFunc{
		"error":   func(int, int, string) (string, error) { return "", errors.New("no proxy today") },
		"no port": func(int, int, string) (string, error) { return "127.0.0.1", nil },
	} {
		_, err := StartEnsemble(t.TempDir(), 3, WithLinks(link))
		if err == nil || !strings.Contains(err.Error(), "link from server") {
			t.Errorf("%s: err = %v, want one naming the link", name, err)
		}
	}
}
