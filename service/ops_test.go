package service_test

import (
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/testserver"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// metricValue is the value of the sample of name with exactly labels in
// g, or -1 if there is none.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

// TestMetrics: calls are counted by method, code and tenant, with their
// latency; Hold streams and waiting calls are gauges while they last.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts, bearer := tokens(t, map[string]string{"alpha": "lock a:"})
	in := startInstance(t, service.Config{Backend: memory.New(), Registerer: reg, Tokens: ts})
	c := clientsOf(t, in.addr, withToken(bearer["alpha"]))
	ctx := ctxFor(t, 30*time.Second)
	calls := func(method, code string) float64 {
		return metricValue(t, reg, "turnstile_serve_calls_total", map[string]string{"method": method, "code": code, "tenant": "alpha"})
	}
	g, err := c.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "a:1"}))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "a:1"}))
	_, _ = c.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "b:1"}))
	if ok, busy, denied := calls("TryAcquire", "ok"), calls("TryAcquire", "aborted"), calls("TryAcquire", "permission_denied"); ok != 1 || busy != 1 || denied != 1 {
		t.Fatalf("TryAcquire counted ok %v, aborted %v, permission_denied %v; want 1 each", ok, busy, denied)
	}
	if n := metricValue(t, reg, "turnstile_serve_call_seconds", map[string]string{"method": "TryAcquire"}); n != 3 {
		t.Fatalf("TryAcquire latencies observed: %v, want 3", n)
	}

	// A waiting Acquire, then a Hold: the gauges count them.
	waited := make(chan error, 1)
	go func() {
		_, err := c.locks.Acquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "a:1", Wait: durationpb.New(20 * time.Second)}))
		waited <- err
	}()
	gauge := func(name string) float64 { return metricValue(t, reg, name, map[string]string{}) }
	// gaugeBecomes reports whether gauge name reads want within 10 s.
	gaugeBecomes := func(name string, want float64) bool {
		return proc.Poll(10*time.Second, 5*time.Millisecond, func() error {
			if gauge(name) != want {
				return errNotYet
			}
			return nil
		}) == nil
	}
	if !gaugeBecomes("turnstile_serve_waiters", 1) {
		t.Fatalf("waiters gauge never 1: %v", gauge("turnstile_serve_waiters"))
	}
	if _, err := c.locks.Release(ctx, connect.NewRequest(&v1.ReleaseRequest{Lease: g.Msg.Lease})); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if w := gauge("turnstile_serve_waiters"); w != 0 {
		t.Fatalf("waiters gauge %v after the wait, want 0", w)
	}
	s, _ := holdStream(t, ctx, c, &v1.HoldRequest{Key: "a:2"})
	if h := gauge("turnstile_serve_holds"); h != 1 {
		t.Fatalf("holds gauge %v while a Hold holds, want 1", h)
	}
	_ = s.Close()
	if !gaugeBecomes("turnstile_serve_holds", 0) {
		t.Fatalf("holds gauge %v after the stream closed", gauge("turnstile_serve_holds"))
	}
	if up := gauge("turnstile_serve_store_up"); up != 1 {
		t.Fatalf("store_up %v, want 1", up)
	}
}

// TestStreamLimits: a connection gets at most MaxStreamsPerConn streams
// at once, and the instance at most MaxHolds Hold streams; over either,
// RESOURCE_EXHAUSTED, TOO_MANY_STREAMS; a stream that ends makes room.
func TestStreamLimits(t *testing.T) {
	in := startInstance(t, service.Config{Backend: memory.New(), MaxStreamsPerConn: 2, MaxHolds: 1})
	ctx := ctxFor(t, 30*time.Second)
	one := clientsOf(t, in.addr)
	for i := range 2 {
		watchStream(t, one, &v1.WatchRequest{Key: "w", Prefix: true})
		_ = i
	}
	s, err := one.locks.Watch(ctx, connect.NewRequest(&v1.WatchRequest{Key: "w", Prefix: true}))
	if err == nil {
		for s.Receive() {
		}
		err = s.Err()
	}
	wantReason(t, "a third stream on the connection", err, connect.CodeResourceExhausted, "TOO_MANY_STREAMS")

	other := clientsOf(t, in.addr)
	h, _ := holdStream(t, ctx, other, &v1.HoldRequest{Key: "h1"})
	s2, err := other.locks.Hold(ctx, connect.NewRequest(&v1.HoldRequest{Key: "h2"}))
	if err == nil {
		for s2.Receive() {
		}
		err = s2.Err()
	}
	wantReason(t, "a second Hold on the instance", err, connect.CodeResourceExhausted, "TOO_MANY_STREAMS")
	_ = h.Close()
	if err := proc.Poll(10*time.Second, 10*time.Millisecond, func() error {
		if in.Holds() != 0 {
			return errNotYet
		}
		return nil
	}); err != nil {
		t.Fatal("the closed Hold still counts")
	}
	holdStream(t, ctx, clientsOf(t, in.addr), &v1.HoldRequest{Key: "h2"})
}

// TestReadiness: /readyz and the gRPC health check say ready while the
// store answers and the instance serves; not ready while the store is
// down, or once the instance drains.
func TestReadiness(t *testing.T) {
	srv := testserver.StartRedis(t)
	store, err := turnstile.Open(ctxFor(t, 10*time.Second), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	in := startInstance(t, service.Config{Backend: store.Backend()})
	status := func() int {
		resp, err := http.Get("http://" + in.addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	await := func(want int, what string) {
		t.Helper()
		if err := proc.Poll(30*time.Second, 100*time.Millisecond, func() error {
			if status() != want {
				return errNotYet
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: /readyz still %d, want %d", what, status(), want)
		}
	}
	await(http.StatusOK, "store up")
	srv.Kill()
	await(http.StatusServiceUnavailable, "store down")
	srv.Restart()
	await(http.StatusOK, "store back")
	in.Drain()
	await(http.StatusServiceUnavailable, "draining")
}

// TestHealthAndReflection: the gRPC health check says SERVING, and
// reflection lists the two services, for grpcurl and the like.
func TestHealthAndReflection(t *testing.T) {
	in := startInstance(t, service.Config{Backend: memory.New()})
	code, _, got := post(t, in.addr, "grpc.health.v1.Health/Check", `{}`)
	if code != 200 || got["status"] != "SERVING_STATUS_SERVING" {
		t.Fatalf("health check: %d %v", code, got)
	}
	rc := grpcreflect.NewClient(h2c(t), "http://"+in.addr, connect.WithGRPC())
	stream := rc.NewStream(ctxFor(t, 10*time.Second))
	defer stream.Close()
	names, err := stream.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"turnstile.v1.Locks": false, "turnstile.v1.Elections": false}
	for _, n := range names {
		if _, ok := want[string(n)]; ok {
			want[string(n)] = true
		}
	}
	for n, seen := range want {
		if !seen {
			t.Errorf("reflection lists %v, not %s", names, n)
		}
	}
	in.Drain()
	if _, _, got := post(t, in.addr, "grpc.health.v1.Health/Check", `{}`); got["status"] != "SERVING_STATUS_NOT_SERVING" {
		t.Fatalf("health check while draining: %v", got)
	}
}
