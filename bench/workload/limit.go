package workload

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// ErrNoRedisBenchmark means redis-benchmark is not on PATH.
var ErrNoRedisBenchmark = errors.New("workload: redis-benchmark not found on PATH; install it with: apt-get install -y redis-tools")

// LimitScript is the script whose EVALSHA capacity Limit measures: the
// least a Redis lock script does.
const LimitScript = "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])"

// LimitResult is what redis-benchmark measured on one server.
type LimitResult struct {
	Kind     string `json:"kind"` // "limit"
	Pipeline int    `json:"pipeline"`
	Clients  int    `json:"clients"`
	Requests int    `json:"requests"`
	// SetPerSecond is plain SET commands per second; EvalshaPerSecond is
	// EVALSHA of LimitScript on random keys per second.
	SetPerSecond     float64 `json:"set_per_second"`
	EvalshaPerSecond float64 `json:"evalsha_per_second"`
	// EvalshaCPUMicros is the server's CPU time (INFO cpu, user + system)
	// per EVALSHA of LimitScript: the server cost of the least a lock
	// script does, to set against a lock's server CPU per acquisition.
	EvalshaCPUMicros float64 `json:"evalsha_cpu_us"`
}

// Limit runs redis-benchmark against the server at addr (host:port):
// requests SET commands, then requests EVALSHA calls of LimitScript on
// random keys, from 50 connections, pipeline commands in flight on each.
func Limit(ctx context.Context, addr string, requests, pipeline int) (LimitResult, error) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return LimitResult{}, ErrNoRedisBenchmark
	}
	if requests < 1 || pipeline < 1 {
		return LimitResult{}, fmt.Errorf("%w: redis-benchmark with %d requests, pipeline %d", ErrUsage, requests, pipeline)
	}
	const clients = 50
	r := LimitResult{Kind: "limit", Pipeline: pipeline, Clients: clients, Requests: requests}
	counter, err := NewCounter([]string{addr})
	if err != nil {
		return r, err
	}
	defer counter.Close()
	sha, err := counter.Do(ctx, 0, "SCRIPT", "LOAD", LimitScript)
	if err != nil {
		return r, fmt.Errorf("workload: load the limit script: %w", err)
	}
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		return r, fmt.Errorf("%w: address %q is not host:port", ErrUsage, addr)
	}
	common := []string{"-h", host, "-p", port, "-c", strconv.Itoa(clients), "-n", strconv.Itoa(requests), "-P", strconv.Itoa(pipeline), "--csv"}
	if r.SetPerSecond, err = redisBenchmark(ctx, bin, append(common, "-t", "set")...); err != nil {
		return r, err
	}
	before, err := counter.Read(ctx)
	if err != nil {
		return r, err
	}
	if r.EvalshaPerSecond, err = redisBenchmark(ctx, bin, append(common, "-r", "1000000", "EVALSHA", sha, "1", "limit:__rand_int__", "v", "1000")...); err != nil {
		return r, err
	}
	after, err := counter.Read(ctx)
	if err != nil {
		return r, err
	}
	d := after.Sub(before)
	if n := d.Commands.Scripts(); n > 0 {
		r.EvalshaCPUMicros = d.CPUSeconds * 1e6 / float64(n)
	}
	return r, nil
}

// redisBenchmark runs redis-benchmark with --csv and returns the requests
// per second of its one test.
func redisBenchmark(ctx context.Context, bin string, args ...string) (float64, error) {
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		return 0, fmt.Errorf("workload: redis-benchmark %s: %w", strings.Join(args, " "), err)
	}
	return parseBenchmarkCSV(string(out))
}

// parseBenchmarkCSV reads the rps column of redis-benchmark --csv output.
func parseBenchmarkCSV(out string) (float64, error) {
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		return 0, fmt.Errorf("workload: redis-benchmark output: %w", err)
	}
	col := 1
	for _, rec := range recs {
		if len(rec) > 1 && rec[0] == "test" {
			for i, name := range rec {
				if name == "rps" {
					col = i
				}
			}
			continue
		}
		if len(rec) > col {
			if v, err := strconv.ParseFloat(rec[col], 64); err == nil {
				return v, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: no requests per second in redis-benchmark output %q", ErrRedis, out)
}
