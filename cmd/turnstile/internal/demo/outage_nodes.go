//go:build unix

package demo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// outageNode is one Redis node of the Redlock, which the demo kills and
// restarts.
type outageNode interface {
	addr() string
	kill()          // SIGKILL, or close an in-process node
	restart() error // on the same address, without the data
	stop()
}

type procNode struct{ s *redisproc.Server }

func (n procNode) addr() string   { return n.s.Addr() }
func (n procNode) kill()          { n.s.Kill() }
func (n procNode) restart() error { return n.s.Restart() }
func (n procNode) stop()          { n.s.Kill() }

type miniNode struct{ m *miniredis.Miniredis }

func (n miniNode) addr() string { return n.m.Addr() }
func (n miniNode) kill()        { n.m.Close() }

// restart forgets the data, as a restart of redis-server without
// persistence does.
func (n miniNode) restart() error { n.m.FlushAll(); return n.m.Restart() }
func (n miniNode) stop()          { n.m.Close() }

// startNodes starts the five Redis nodes: redis-server processes when
// installed (and not --in-process), in-process ones otherwise. It returns
// what stops them.
func (o *outage) startNodes() (stop func(), err error) {
	o.real = !o.env.inProcess && redisproc.Available()
	var mu sync.Mutex
	stopAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range o.nodes {
			n.stop()
		}
	}
	if !o.real {
		for range outageNodes {
			m := miniredis.NewMiniRedis()
			// Lock TTLs pass with the wall clock, as on a real server.
			m.ClockTTL(true)
			if err := m.StartAddr("127.0.0.1:0"); err != nil {
				stopAll()
				return nil, fmt.Errorf("start in-process redis: %w", err)
			}
			o.nodes = append(o.nodes, miniNode{m})
		}
		why := "redis-server is not installed; install it with: " + redisproc.InstallHint
		if o.env.inProcess {
			why = "as --in-process asks"
		}
		o.note("redlock-outage: %d in-process Redis nodes (miniredis) on %s instead of redis-server processes, %s; a node is killed by closing it and restarted empty on its address; no restart quarantine (miniredis has no INFO server)",
			outageNodes, strings.Join(o.addrs(), ", "), why)
		return stopAll, nil
	}
	dir, err := os.MkdirTemp("", "turnstile-demo-redlock-")
	if err != nil {
		return nil, err
	}
	stop = func() {
		stopAll()
		_ = os.RemoveAll(dir)
	}
	o.env.progress("redlock-outage: starting %d redis-server nodes on free loopback ports...", outageNodes)
	o.nodes = make([]outageNode, outageNodes)
	var errs []error
	var wg sync.WaitGroup
	for i := range outageNodes {
		wg.Go(func() {
			d := filepath.Join(dir, "node"+strconv.Itoa(i+1))
			err := os.Mkdir(d, 0o700)
			var s *redisproc.Server
			if err == nil {
				s, err = redisproc.Start(d)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			o.nodes[i] = procNode{s}
		})
	}
	wg.Wait()
	o.nodes = slices.DeleteFunc(o.nodes, func(n outageNode) bool { return n == nil })
	if len(errs) > 0 {
		stop()
		return nil, fmt.Errorf("start the Redlock's nodes: %w", errors.Join(errs...))
	}
	// Each node refuses locks for a TTL after its process started, as a
	// Redlock's nodes must: a restarted node has forgotten the locks it
	// granted.
	o.quar = o.cfg.ttl
	o.env.progress("redlock-outage: %d redis-server nodes on %s (started for this scenario)", outageNodes, strings.Join(o.addrs(), ", "))
	return stop, nil
}

// addrs are the nodes' addresses, noted when they started: an
// in-process node that is down has none.
func (o *outage) addrs() []string {
	if o.nodeAddrs == nil {
		for _, n := range o.nodes {
			o.nodeAddrs = append(o.nodeAddrs, n.addr())
		}
	}
	return o.nodeAddrs
}

func (o *outage) killedAddrs() string { return strings.Join(o.addrs()[:outageKilled], ", ") }

// each runs f on the nodes that die, at once: a majority fails together.
func (o *outage) each(f func(outageNode)) {
	var wg sync.WaitGroup
	for _, n := range o.nodes[:outageKilled] {
		wg.Go(func() { f(n) })
	}
	wg.Wait()
}

// nodeTimeout is the Redlock's node timeout: a tenth of the TTL, the
// most a call allows.
func (o *outage) nodeTimeout() time.Duration { return o.cfg.ttl / 10 }

func (o *outage) quarantineNote() string {
	if o.quar == 0 {
		return ", no restart quarantine"
	}
	return fmt.Sprintf(", restart quarantine %v", o.quar)
}

func (o *outage) quarantineAfterRestart() string {
	if o.quar == 0 {
		return ""
	}
	return fmt.Sprintf("; each refuses locks for its %v restart quarantine", o.quar)
}
