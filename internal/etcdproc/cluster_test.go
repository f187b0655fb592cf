package etcdproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstilelock/turnstile/internal/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dataDir is a temporary directory in memory where /dev/shm exists: etcd
// fsyncs every write, which on a busy disk slows the test down.
func dataDir(t *testing.T) string { return proctest.MemDir(t, "turnstile-etcd-cluster-") }

// put writes through any running, unpaused member other than skip.
func put(c *Cluster, skip int, key, value string) error {
	var err error
	for i, s := range c.Members() {
		if i == skip || s.PID() == 0 || s.Paused() {
			continue
		}
		if err = s.Put(key, value); err == nil {
			return nil
		}
	}
	return err
}

func TestClusterSurvivesItsLeader(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	c, err := StartCluster(dataDir(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	if len(c.Members()) != 3 || len(c.Endpoints()) != 3 {
		t.Fatalf("%d members, %d endpoints", len(c.Members()), len(c.Endpoints()))
	}
	if want := "etcd://" + strings.Join(c.Addrs(), ","); c.URL() != want || strings.Count(c.URL(), ",") != 2 {
		t.Fatalf("URL = %q, want %q", c.URL(), want)
	}
	old, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if err := put(c, -1, "before", "1"); err != nil {
		t.Fatal(err)
	}

	// The leader crashes: the other two elect one of themselves and take
	// writes.
	c.Members()[old].Kill()
	if c.Members()[old].PID() != 0 {
		t.Fatal("a killed member has a PID")
	}
	var leader int
	proctest.Eventually(t, 30*time.Second, "a new leader", func() error {
		var err error
		leader, err = c.Leader()
		return err
	})
	if leader == old {
		t.Fatalf("leader is still the killed member %d", old)
	}
	proctest.Eventually(t, 30*time.Second, "a put without the old leader", func() error { return put(c, old, "during", "2") })

	// The old leader comes back with its data directory, rejoins, and
	// catches up on the write it missed.
	if err := c.Members()[old].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, 30*time.Second, "the restarted member catching up", func() error {
		v, ok, err := c.Members()[old].LocalGet("during")
		if err == nil && (!ok || v != "2") {
			err = fmt.Errorf("during = %q, %v", v, ok)
		}
		return err
	})

	// A follower freezes: the other two are a quorum and still take
	// writes, and it catches up once it thaws.
	leader, err = c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % 3
	f := c.Members()[follower]
	if err := f.Pause(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := put(c, follower, "paused"+strconv.Itoa(i), "3"); err != nil {
			t.Fatalf("put with a follower paused: %v", err)
		}
	}
	if err := f.Resume(); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, 30*time.Second, "the resumed follower catching up", func() error {
		_, ok, err := f.LocalGet("paused4")
		if err == nil && !ok {
			err = fmt.Errorf("paused4 missing")
		}
		return err
	})
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestStartClusterRefusesBadInput(t *testing.T) {
	for _, n := range []int{0, -1, MaxClusterMembers + 1} {
		if _, err := StartCluster(t.TempDir(), n); err == nil {
			t.Errorf("StartCluster with %d members: no error", n)
		}
	}
	if _, err := StartCluster(t.TempDir(), 3, WithElection(100*time.Millisecond, 200*time.Millisecond)); err == nil {
		t.Error("an election timeout of two heartbeats: no error")
	}
}

// headerLinks are TCP forwarders in front of members' peer ports that
// know who dialed a connection by the X-Server-From header of its first
// request, and can cut a member off: its connections, both ways, are
// closed and new ones refused. A connection is tracked under its ends'
// ids, sender and member dialed.
type headerLinks struct {
	proctest.Links[[2]string]
	cut  string          // the id cut off, in hexadecimal, or ""
	to   map[int]string  // the link's member's id, once known
	seen map[string]bool // senders seen
}

func (l *headerLinks) link(member int, addr string) (string, error) {
	return l.Listen(func(c net.Conn) {
		l.Go(func() { l.serve(c, member, addr) })
	})
}

func (l *headerLinks) serve(c net.Conn, member int, addr string) {
	var head bytes.Buffer
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := textproto.NewReader(bufio.NewReader(io.TeeReader(c, &head)))
	_, _ = r.ReadLine()
	h, _ := r.ReadMIMEHeader()
	_ = c.SetReadDeadline(time.Time{})
	from := h.Get("X-Server-From")
	l.Forward(c, addr, head.Bytes(), func() ([2]string, bool, bool) {
		to := l.to[member]
		if l.cut != "" && (from == l.cut || to == l.cut) {
			return [2]string{}, false, false
		}
		if from != "" {
			l.seen[from] = true
		}
		return [2]string{from, to}, true, true
	})
}

func (l *headerLinks) isolate(id string) {
	l.Lock()
	defer l.Unlock()
	l.cut = id
	l.Drop(func(ends [2]string) bool { return ends[0] == id || ends[1] == id })
}

// TestClusterThroughPeerLinks: the members of a cluster started
// WithPeerLinks reach each other only through the links, which know the
// sender of every raft connection by its X-Server-From header (the
// member's ID in hexadecimal): cutting the leader's connections, both
// ways, makes the two others elect one of themselves.
func TestClusterThroughPeerLinks(t *testing.T) {
	if !Available() {
		t.Fatal(ErrNotInstalled)
	}
	links := &headerLinks{to: map[int]string{}, seen: map[string]bool{}}
	t.Cleanup(links.Close)
	c, err := StartCluster(dataDir(t), 3, WithPeerLinks(links.link))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill) // runs before links.Close
	links.Lock()
	for i := range c.Members() {
		links.to[i] = strconv.FormatUint(c.ID(i), 16)
	}
	links.Unlock()
	proctest.Eventually(t, 30*time.Second, "a raft connection from every member through the links", func() error {
		links.Lock()
		defer links.Unlock()
		for i := range c.Members() {
			if !links.seen[links.to[i]] {
				return fmt.Errorf("none from member %d (%s); seen %v", i, links.to[i], links.seen)
			}
		}
		return nil
	})
	old, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	links.isolate(links.to[old])
	proctest.Eventually(t, 60*time.Second, "a leader among the two others", func() error {
		for i, s := range c.Members() {
			if i == old {
				continue
			}
			_, l, err := s.Status()
			if err != nil {
				return err
			}
			if l == 0 || l == c.ID(old) {
				return fmt.Errorf("member %d follows %x", i, l)
			}
		}
		return nil
	})
	if c.Members()[old].PID() == 0 {
		t.Fatalf("the cut-off member %d is not running", old)
	}
}

func TestStartClusterRefusesABadPeerLink(t *testing.T) {
	for name, link := range map[string]PeerLink{
		"error":   func(int, string) (string, error) { return "", errors.New("no proxy today") },
		"no port": func(int, string) (string, error) { return "127.0.0.1", nil },
	} {
		_, err := StartCluster(t.TempDir(), 3, WithPeerLinks(link))
		if err == nil || !strings.Contains(err.Error(), "link to member") {
			t.Errorf("%s: err = %v, want one naming the link", name, err)
		}
	}
}
