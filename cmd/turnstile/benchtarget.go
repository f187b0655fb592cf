package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/turnstilelock/turnstile/cmd/turnstile/internal/cli"
	"github.com/turnstilelock/turnstile/internal/redact"
	"github.com/turnstilelock/turnstile/internal/redisproc"
	"github.com/turnstilelock/turnstile/internal/storeurl"
)

// ownNodes is how many redis-servers "turnstile bench" starts for its
// Redlock cell when it runs on servers of its own.
const ownNodes = 5

// benchURLForms says what --url takes.
const benchURLForms = "want redis://HOST:PORT, rediss://HOST:PORT or redlock://HOST1:PORT1,HOST2:PORT2 (two or more nodes)"

// benchTarget is where "turnstile bench" runs its cells: the turnstile
// URLs it locks through, and the servers whose commands it counts.
type benchTarget struct {
	// single is the turnstile URL of the cells on one Redis (or one Redis
	// Cluster), singleAddrs the servers whose commands they count.
	single      string
	singleAddrs []string
	// redlock is the turnstile URL of the Redlock cell and redlockAddrs
	// its nodes; redlock is "" when the target has no Redlock of two or
	// more nodes.
	redlock      string
	redlockAddrs []string
	// name says what the target is, with any password masked.
	name string
}

// parseBenchURL reads --url: a redis:// or rediss:// URL (one server, or
// several hosts of one Redis Cluster), or a redlock:// URL, whose first
// node also serves the single-node cells. Only the syntax is checked
// here; turnstile.Open checks the rest when the run starts. from says
// where the URL came from ("--url", "--backend-file F", ...), for errors,
// which never show its secrets.
func parseBenchURL(raw, from string) (benchTarget, error) {
	t, err := readBenchURL(raw, from)
	if err != nil {
		return t, redact.Error(err, raw)
	}
	return t, nil
}

func readBenchURL(raw, from string) (benchTarget, error) {
	var t benchTarget
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL, password and all: give only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return t, fmt.Errorf("%s is not a URL (%v): %s", from, err, benchURLForms)
	}
	t.name = cli.MaskURL(raw)
	if from == "$"+backendEnv {
		// Say so: the variable may have been set for turnstile run.
		t.name += " (from $" + backendEnv + ")"
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "redis", "rediss", "redlock":
	default:
		return t, fmt.Errorf("%s %s: %s", from, cli.MaskURL(raw), benchURLForms)
	}
	if u.Opaque != "" {
		return t, fmt.Errorf("%s %s: want %s://HOST:PORT", from, cli.MaskURL(raw), scheme)
	}
	// An empty host is localhost for redis:// (as turnstile.Open reads
	// it) and refused for redlock://.
	emptyHost := "localhost"
	if scheme == "redlock" {
		emptyHost = ""
	}
	nodes, err := storeurl.SplitHosts(u.Host, "6379", emptyHost)
	if err != nil {
		return t, fmt.Errorf("%s %s: %w", from, cli.MaskURL(raw), err)
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = counterAddr(u, n)
	}
	if scheme != "redlock" {
		t.single, t.singleAddrs = raw, addrs
		return t, nil
	}
	// The single-node cells run on the first node as a plain Redis, with
	// the settings that a redis:// URL knows.
	t.single, t.singleAddrs = nodeURL(u, nodes[0], pick(u.Query(), "prefix", "fence_grace", "dial_timeout", "flush_delay")), addrs[:1]
	if len(nodes) >= 2 {
		t.redlock, t.redlockAddrs = raw, addrs
	}
	return t, nil
}

// nodeURL is the URL of the node at hostport of u: u's user, password
// and database, TLS where u is rediss://, and the query q.
// The node's TLS and password file are u's too.
func nodeURL(u *url.URL, hostport string, q url.Values) string {
	scheme := "redis"
	if strings.EqualFold(u.Scheme, "rediss") {
		scheme = "rediss"
	}
	uq := u.Query()
	if on, err := storeurl.OnOff(uq.Get("tls")); err == nil && on {
		scheme = "rediss" // redlock://...?tls=on
	}
	for k, v := range pick(uq, append(storeurl.TLSParamNames, storeurl.PasswordFileParam)...) {
		q[k] = v
	}
	n := url.URL{Scheme: scheme, User: u.User, Host: hostport, Path: u.Path, RawQuery: q.Encode()}
	return n.String()
}

// pick returns the parameters of q named.
func pick(q url.Values, names ...string) url.Values {
	p := url.Values{}
	for _, k := range names {
		if v, ok := q[k]; ok {
			p[k] = v
		}
	}
	return p
}

// counterAddr is how a cell names the node at hostport of u to
// workload.Run, which reads the node's INFO commandstats and cpu over a
// connection of its own before and after the cell: a URL, so that the
// password and TLS of u apply to it too.
func counterAddr(u *url.URL, hostport string) string {
	return nodeURL(u, hostport, url.Values{})
}

// benchServers are the redis-servers "turnstile bench" runs on when no
// --url is given.
type benchServers struct {
	dir     string
	servers []*redisproc.Server
}

// startBenchServers starts n redis-servers on free loopback ports. It
// fails at once when redis-server is not installed: an in-process
// stand-in would give figures that say nothing about Redis.
func startBenchServers(n int) (*benchServers, benchTarget, error) {
	var t benchTarget
	if !redisproc.Available() {
		return nil, t, fmt.Errorf("%w; or pass --url redis://HOST:PORT to measure a server you run", redisproc.ErrNotInstalled)
	}
	dir, err := os.MkdirTemp("", "turnstile-bench-")
	if err != nil {
		return nil, t, err
	}
	s := &benchServers{dir: dir}
	for i := range n {
		d := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			s.Close()
			return nil, t, err
		}
		srv, err := redisproc.Start(d)
		if err != nil {
			s.Close()
			return nil, t, err
		}
		s.servers = append(s.servers, srv)
	}
	first := s.servers[0]
	u, _ := url.Parse(first.URL())
	t.single, t.singleAddrs = first.URL(), []string{counterAddr(u, first.Addr())}
	t.name = fmt.Sprintf("redis-server on %s, started for this run", first.Addr())
	if n > 1 {
		var hosts []string
		for _, srv := range s.servers {
			hosts = append(hosts, srv.Addr())
		}
		// Restart quarantine off: the servers have just started and hold
		// no lock anyone could lose.
		t.redlock = "redlock://" + strings.Join(hosts, ",") + "?quarantine=0"
		u, _ := url.Parse(t.redlock)
		for _, h := range hosts {
			t.redlockAddrs = append(t.redlockAddrs, counterAddr(u, h))
		}
		t.name = fmt.Sprintf("%d redis-servers on %s, started for this run (the first for the single-node cells)", n, strings.Join(hosts, ", "))
	}
	return s, t, nil
}

// Close stops the servers and removes their files.
func (s *benchServers) Close() {
	for _, srv := range s.servers {
		srv.Kill()
	}
	_ = os.RemoveAll(s.dir)
}
