package workload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// ErrRedis is a Redis error reply or a malformed reply to the
// inspection commands this package sends itself.
var ErrRedis = errors.New("workload: redis")

// CommandStats is INFO commandstats summed over nodes: calls per command
// (lower-case, e.g. "evalsha"), INFO itself left out.
type CommandStats map[string]int64

// Sub returns the calls made between before and s.
func (s CommandStats) Sub(before CommandStats) CommandStats {
	d := make(CommandStats, len(s))
	for name, n := range s {
		if n -= before[name]; n != 0 {
			d[name] = n
		}
	}
	return d
}

// Total is the number of calls over all commands.
func (s CommandStats) Total() int64 {
	var t int64
	for _, n := range s {
		t += n
	}
	return t
}

// Scripts is the number of script calls (EVAL, EVALSHA, FCALL and their
// read-only forms).
func (s CommandStats) Scripts() int64 {
	var t int64
	for _, name := range []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"} {
		t += s[name]
	}
	return t
}

// Counter reads INFO commandstats from a set of servers over connections
// of its own, opened once, so that reading costs no connection set-up
// commands. It is not safe for concurrent use.
type Counter struct {
	conns []*respConn
}

// NewCounter connects to every address.
func NewCounter(addrs []string) (*Counter, error) {
	c := &Counter{}
	for _, a := range addrs {
		rc, err := dialRESP(a)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.conns = append(c.conns, rc)
	}
	return c, nil
}

// Read returns the servers' counters now.
func (c *Counter) Read(ctx context.Context) (CommandStats, error) {
	sum := CommandStats{}
	for _, rc := range c.conns {
		info, err := rc.do(ctx, "INFO", "commandstats")
		if err != nil {
			return nil, fmt.Errorf("workload: INFO commandstats on %s: %w", rc.addr, err)
		}
		if err := parseCommandStats(info, sum); err != nil {
			return nil, fmt.Errorf("workload: INFO commandstats on %s: %w", rc.addr, err)
		}
	}
	return sum, nil
}

// Do sends one command to the i-th server and returns its reply as text
// (a status, an integer or a bulk string).
func (c *Counter) Do(ctx context.Context, i int, args ...string) (string, error) {
	if i < 0 || i >= len(c.conns) {
		return "", fmt.Errorf("%w: no server %d", ErrUsage, i)
	}
	return c.conns[i].do(ctx, args...)
}

// Close closes the connections.
func (c *Counter) Close() {
	for _, rc := range c.conns {
		_ = rc.conn.Close()
	}
	c.conns = nil
}

// parseCommandStats adds lines "cmdstat_NAME:calls=N,usec=..." to sum.
func parseCommandStats(info string, sum CommandStats) error {
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			return fmt.Errorf("%w: malformed line %q", ErrRedis, line)
		}
		calls, ok := strings.CutPrefix(fields, "calls=")
		if !ok {
			return fmt.Errorf("%w: no calls in %q", ErrRedis, line)
		}
		calls, _, _ = strings.Cut(calls, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: calls in %q: %v", ErrRedis, line, err)
		}
		if name = strings.ToLower(name); name != "info" {
			sum[name] += n
		}
	}
	return nil
}

// respConn speaks just enough RESP for INFO and SCRIPT LOAD.
type respConn struct {
	addr string
	conn net.Conn
	rd   *bufio.Reader
}

func dialRESP(addr string) (*respConn, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("workload: connect to %s: %w", addr, err)
	}
	return &respConn{addr: addr, conn: conn, rd: bufio.NewReader(conn)}, nil
}

func (rc *respConn) do(ctx context.Context, args ...string) (string, error) {
	dl := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = rc.conn.SetDeadline(dl)
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(rc.conn, b.String()); err != nil {
		return "", err
	}
	line, err := rc.rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("%w: empty reply", ErrRedis)
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%w: %s", ErrRedis, line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("%w: bulk reply %q", ErrRedis, line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rc.rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("%w: unexpected reply %q", ErrRedis, line)
}
