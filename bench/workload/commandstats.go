package workload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/internal/redact"
	tsredis "github.com/turnstilelock/turnstile/redis"
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

// Sample is what the servers reported at one moment, summed over nodes:
// their command counters and the CPU time their processes had used.
type Sample struct {
	Commands CommandStats
	// CPUSeconds is used_cpu_user + used_cpu_sys from INFO cpu: every
	// thread of the server process, in user and kernel mode.
	CPUSeconds float64
	// Writes and Syncs are, for a store with a replicated log (etcd),
	// the log entries it committed and the fsyncs of its log; 0 for
	// Redis.
	Writes, Syncs float64
}

// Sub returns what happened between before and s.
func (s Sample) Sub(before Sample) Sample {
	return Sample{
		Commands:   s.Commands.Sub(before.Commands),
		CPUSeconds: s.CPUSeconds - before.CPUSeconds,
		Writes:     s.Writes - before.Writes,
		Syncs:      s.Syncs - before.Syncs,
	}
}

// Counter reads INFO commandstats and cpu from a set of servers over
// rueidis clients of its own, connected once, so that reading costs no
// connection set-up commands. It is not safe for concurrent use.
type Counter struct {
	nodes []counterNode
}

type counterNode struct {
	addr   string
	client rueidis.Client
}

// NewCounter connects to every server: each address is host:port, or a
// redis:// or rediss:// URL (user, password, database and TLS as rueidis
// reads them) for servers that need them.
func NewCounter(addrs []string) (*Counter, error) {
	c := &Counter{}
	for _, a := range addrs {
		opt, err := counterOption(a)
		if err != nil {
			c.Close()
			return nil, redact.Error(err, a)
		}
		rc, err := rueidis.NewClient(opt)
		if err != nil {
			c.Close()
			// The driver's error may repeat the URL: mask it there too.
			return nil, redact.Error(fmt.Errorf("workload: connect to %s: %w", redact.URL(a), err), a)
		}
		c.nodes = append(c.nodes, counterNode{addr: redact.URL(a), client: rc})
	}
	return c, nil
}

// counterOption makes one server's client options: one node, no
// client-side cache (whose invalidations would count as commands).
func counterOption(addr string) (rueidis.ClientOption, error) {
	opt := rueidis.ClientOption{InitAddress: []string{addr}}
	if strings.Contains(addr, "://") {
		// Read as turnstile reads it: TLS and password_file included.
		var err error
		if opt, _, err = tsredis.ParseURL(addr); err != nil {
			return opt, fmt.Errorf("%w: server %s: %v", ErrUsage, redact.URL(addr), err)
		}
	}
	opt.DisableCache = true
	opt.ForceSingleClient = true
	opt.Dialer.Timeout = 5 * time.Second
	return opt, nil
}

// Read returns the servers' counters and CPU time now.
func (c *Counter) Read(ctx context.Context) (Sample, error) {
	sum := Sample{Commands: CommandStats{}}
	for _, n := range c.nodes {
		info, err := n.client.Do(ctx, n.client.B().Info().Section("commandstats").Section("cpu").Build()).ToString()
		if err != nil {
			return Sample{}, fmt.Errorf("workload: INFO commandstats cpu on %s: %w", n.addr, err)
		}
		if err := parseCommandStats(info, sum.Commands); err != nil {
			return Sample{}, fmt.Errorf("workload: INFO commandstats on %s: %w", n.addr, err)
		}
		cpu, err := parseCPU(info)
		if err != nil {
			return Sample{}, fmt.Errorf("workload: INFO cpu on %s: %w", n.addr, err)
		}
		sum.CPUSeconds += cpu
	}
	return sum, nil
}

// Do sends one command to the i-th server and returns its reply as text
// (a status, an integer or a bulk string).
func (c *Counter) Do(ctx context.Context, i int, args ...string) (string, error) {
	if i < 0 || i >= len(c.nodes) || len(args) == 0 {
		return "", fmt.Errorf("%w: command %q for server %d of %d", ErrUsage, args, i, len(c.nodes))
	}
	n := c.nodes[i]
	res := n.client.Do(ctx, n.client.B().Arbitrary(args...).Build())
	if s, err := res.ToString(); err == nil {
		return s, nil
	}
	v, err := res.AsInt64()
	if err != nil {
		return "", fmt.Errorf("%w: %s on %s: %v", ErrRedis, args[0], n.addr, err)
	}
	return strconv.FormatInt(v, 10), nil
}

// Close closes the connections.
func (c *Counter) Close() {
	for _, n := range c.nodes {
		n.client.Close()
	}
	c.nodes = nil
}

// parseCPU returns used_cpu_user + used_cpu_sys from INFO cpu.
func parseCPU(info string) (float64, error) {
	var sum float64
	seen := 0
	for line := range strings.Lines(info) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "used_cpu_user" && name != "used_cpu_sys") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %s in %q: %v", ErrRedis, name, line, err)
		}
		sum += f
		seen++
	}
	if seen != 2 {
		return 0, fmt.Errorf("%w: no used_cpu_user and used_cpu_sys in INFO cpu", ErrRedis)
	}
	return sum, nil
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
