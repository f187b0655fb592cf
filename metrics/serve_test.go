package metrics_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/metrics"
)

// scrape GETs url without keeping the connection.
func scrape(t *testing.T, url string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func TestServe(t *testing.T) {
	c, _, reg, _ := newClient(t, memory.New())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := metrics.Serve(ctx, "127.0.0.1:0", reg)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if tcp, ok := addr.(*net.TCPAddr); !ok || tcp.Port == 0 {
		t.Fatalf("Serve returned %v, want the bound TCP address", addr)
	}

	l, err := c.Acquire(ctx, "lock:inventory:12345")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	status, body := scrape(t, "http://"+addr.String()+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: status %d\n%s", status, body)
	}
	for _, line := range []string{
		"# TYPE turnstile_acquisitions_total counter",
		`turnstile_acquisitions_total{backend="memory",outcome="acquired"} 1`,
		`turnstile_leases_held{backend="memory"} 1`,
		`turnstile_acquire_duration_seconds_count{backend="memory",outcome="acquired"} 1`,
		`turnstile_acquire_retries_bucket{backend="memory",le="0"} 1`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("the scrape lacks %q:\n%s", line, body)
		}
	}
	if strings.Contains(body, "lock:inventory:12345") || strings.Contains(body, l.Owner()) {
		t.Error("the scrape shows a lock key or owner id; labels must stay few-valued")
	}
	if status, _ := scrape(t, "http://"+addr.String()+"/"); status != http.StatusNotFound {
		t.Errorf("GET /: status %d, want 404", status)
	}

	cancel()
	eventually(t, "the server to stop listening", func() bool {
		conn, err := net.DialTimeout("tcp", addr.String(), time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
}

func TestServeRejectsBadInput(t *testing.T) {
	reg := prometheus.NewRegistry()
	ctx := ctxFor(t, 10*time.Second)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for name, tc := range map[string]struct {
		ctx  context.Context
		addr string
		g    prometheus.Gatherer
		want error
	}{
		"nil context":       {nil, "127.0.0.1:0", reg, turnstile.ErrInvalidOption},
		"nil gatherer":      {ctx, "127.0.0.1:0", nil, turnstile.ErrInvalidOption},
		"context done":      {done, "127.0.0.1:0", reg, context.Canceled},
		"port out of range": {ctx, "127.0.0.1:70000", reg, nil},
		"no port":           {ctx, "127.0.0.1", reg, nil},
		"address in use":    {ctx, busy.Addr().String(), reg, nil},
	} {
		t.Run(name, func(t *testing.T) {
			addr, err := metrics.Serve(tc.ctx, tc.addr, tc.g)
			if err == nil || addr != nil {
				t.Fatalf("Serve = %v, %v; want an error", addr, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Serve: %v, want an error matching %v", err, tc.want)
			}
		})
	}
}

func TestHandler(t *testing.T) {
	m, reg := newCollector(t)
	m.SetBreakerState("orders", "open")
	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `turnstile_breaker_state{name="orders"} 2`) {
		t.Fatalf("Handler: status %d\n%s", rec.Code, rec.Body)
	}

	rec = httptest.NewRecorder()
	metrics.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "nil prometheus.Gatherer") {
		t.Fatalf("Handler(nil): status %d %q, want 500 saying why", rec.Code, rec.Body)
	}
}
