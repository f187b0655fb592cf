package etcdproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dataDir is a temporary directory in memory where /dev/shm exists: etcd
// fsyncs every write, which on a busy disk slows the test down.
func dataDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "turnstile-etcd-cluster-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// eventually polls f until it returns nil, for at most timeout.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

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
	eventually(t, 30*time.Second, "a new leader", func() error {
		var err error
		leader, err = c.Leader()
		return err
	})
	if leader == old {
		t.Fatalf("leader is still the killed member %d", old)
	}
	eventually(t, 30*time.Second, "a put without the old leader", func() error { return put(c, old, "during", "2") })

	// The old leader comes back with its data directory, rejoins, and
	// catches up on the write it missed.
	if err := c.Members()[old].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the restarted member catching up", func() error {
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
	eventually(t, 30*time.Second, "the resumed follower catching up", func() error {
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
