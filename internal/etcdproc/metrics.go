package etcdproc

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// GRPCCalls is how many calls of the gRPC method (such as "Authenticate"
// or "LeaseKeepAlive") the server has begun since it started: the sum of
// its grpc_server_started_total counters for that method, read from the
// /metrics endpoint. It counts on the server, so it sees every call,
// whichever client or library made it.
func (s *Server) GRPCCalls(method string) (int, error) {
	// A busy server answers slowly, and a busy server is what the
	// counts are asked about.
	c := *s.httpc
	c.Timeout = 30 * time.Second
	defer c.CloseIdleConnections()
	resp, err := c.Get(s.Endpoint() + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("etcdproc: /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("etcdproc: /metrics: %s", resp.Status)
	}
	return countStarted(io.LimitReader(resp.Body, 16<<20), method)
}

// countStarted sums the grpc_server_started_total samples of method in a
// Prometheus text exposition.
func countStarted(r io.Reader, method string) (int, error) {
	const metric = "grpc_server_started_total{"
	label := `grpc_method="` + method + `"`
	total := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric) {
			continue
		}
		end := strings.IndexByte(line, '}')
		if end < 0 || !strings.Contains(line[:end], label) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return 0, fmt.Errorf("etcdproc: /metrics: %q: %w", line, err)
		}
		total += int(v)
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("etcdproc: /metrics: %w", err)
	}
	return total, nil
}
