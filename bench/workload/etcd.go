package workload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	_ "github.com/turnstilelock/turnstile/etcd" // registers etcd://
)

// TurnstileEtcd is turnstile on etcd as its users run it: opened by URL
// (etcd://host:port) at its defaults — the store's own queue for waiters,
// the watchdog — with TTL and DefaultBackoff, as Turnstile on Redis.
func TurnstileEtcd() Library {
	return TurnstileOn("etcd", "etcd's queue of waiters, the watchdog", func(addr string) string { return "etcd://" + addr })
}

// EtcdStats reads an etcd member's /metrics at http://addr: the gRPC
// messages it received per method (a unary call is one, a stream counts
// each request sent on it: a lease renewal, a watch), the raft proposals
// it committed (its log's writes), its WAL fsyncs and its CPU time.
func EtcdStats(addrs []string) (Stats, error) {
	if len(addrs) != 1 {
		return nil, fmt.Errorf("%w: etcd stats for %d members, want one", ErrUsage, len(addrs))
	}
	return &etcdStats{url: "http://" + addrs[0] + "/metrics", hc: &http.Client{Timeout: 30 * time.Second}}, nil
}

type etcdStats struct {
	url string
	hc  *http.Client
}

func (e *etcdStats) Close() { e.hc.CloseIdleConnections() }

func (e *etcdStats) Read(ctx context.Context) (Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url, nil)
	if err != nil {
		return Sample{}, err
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return Sample{}, fmt.Errorf("workload: etcd /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Sample{}, fmt.Errorf("workload: etcd /metrics: %s", resp.Status)
	}
	return parseEtcdMetrics(io.LimitReader(resp.Body, 16<<20))
}

// parseEtcdMetrics reads the samples EtcdStats reports from a
// Prometheus text exposition.
func parseEtcdMetrics(r io.Reader) (Sample, error) {
	s := Sample{Commands: CommandStats{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, labels, value, ok := metricLine(line)
		if !ok {
			continue
		}
		switch name {
		case "grpc_server_msg_received_total":
			_, m, _ := strings.Cut(labels, `grpc_method="`)
			m, _, _ = strings.Cut(m, `"`)
			if m != "" {
				s.Commands[strings.ToLower(m)] += int64(value)
			}
		case "etcd_server_proposals_committed_total":
			s.Writes = value
		case "etcd_disk_wal_fsync_duration_seconds_count":
			s.Syncs = value
		case "process_cpu_seconds_total":
			s.CPUSeconds = value
		}
	}
	if err := sc.Err(); err != nil {
		return Sample{}, fmt.Errorf("workload: etcd /metrics: %w", err)
	}
	return s, nil
}

// metricLine splits `name{labels} value` (labels optional).
func metricLine(line string) (name, labels string, value float64, ok bool) {
	head, v, found := strings.Cut(line, " ")
	if i := strings.LastIndexByte(line, '}'); i >= 0 {
		head, v, found = line[:i+1], strings.TrimSpace(line[i+1:]), true
	}
	if !found {
		return "", "", 0, false
	}
	name, labels, _ = strings.Cut(head, "{")
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return "", "", 0, false
	}
	return name, labels, f, true
}
