package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile/internal/testserver"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
	"github.com/turnstilelock/turnstile/service/gen/turnstile/v1/turnstilev1connect"
)

// benchLocks is how many locks are held while the page renders.
const benchLocks = 100_000

// BenchmarkFirstPage100kLocks measures the operator page's first render
// in headless Chromium — load, session, the server-paged list of the
// locks held, the first 50 rows in the table — with 100,000 locks held in
// a real redis-server behind a real "turnstile serve", and reports the
// service's memory (resident set now and at its peak) after the renders.
func BenchmarkFirstPage100kLocks(b *testing.B) {
	br := newBrowser(b)
	srv := testserver.StartRedis(b)
	addr, serve := startServe(b, "--backend", srv.URL())
	fill(b, addr, benchLocks)
	url := "http://" + addr + "/"
	row50 := chromedp.WaitVisible(chromedp.CSS("#locks tbody tr:nth-child(50)"))
	br.run(b, "first render", chromedp.Navigate(url), row50)
	var rendered float64
	for b.Loop() {
		br.run(b, "render", chromedp.Navigate("about:blank"), chromedp.Navigate(url), row50)
		// From the start of the navigation to the rows in the table, as
		// the page itself measured it.
		rendered += eval[float64](b, br, `performance.getEntriesByName('turnstile-locks')[0].startTime`)
	}
	b.StopTimer()
	b.ReportMetric(rendered/float64(b.N), "render-ms")
	b.ReportMetric(0, "ns/op") // the loop's time is mostly the driver's
	b.Logf("requests of the last render: %s", eval[string](b, br, `performance.getEntriesByType('resource').map(e => e.name.replace(location.origin, '') + ' ' + Math.round(e.startTime) + '+' + Math.round(e.duration) + 'ms').join(', ')`))
	if note := br.text(b, "#list-note"); !strings.Contains(note, "narrow the prefix") {
		b.Fatalf("list note %q: want the first window of more locks", note)
	}
	if took := br.text(b, "#list-note"); took != "" {
		b.Logf("page: %s", took)
	}
	rss, hwm := memory(b, serve.cmd.Process.Pid)
	b.ReportMetric(float64(rss)/(1<<20), "serve-RSS-MiB")
	b.ReportMetric(float64(hwm)/(1<<20), "serve-peak-RSS-MiB")
}

// fill takes n locks through the service's Batch call, held for an hour.
func fill(b *testing.B, addr string, n int) {
	b.Helper()
	c := turnstilev1connect.NewLocksClient(http.DefaultClient, "http://"+addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const per = 1000
	for i := 0; i < n; i += per {
		req := &v1.BatchRequest{}
		for j := i; j < min(n, i+per); j++ {
			req.Ops = append(req.Ops, &v1.BatchOp{Op: &v1.BatchOp_TryAcquire{TryAcquire: &v1.AcquireRequest{
				Key: fmt.Sprintf("orders:%07d", j), Ttl: durationpb.New(time.Hour)}}})
		}
		resp, err := c.Batch(ctx, connect.NewRequest(req))
		if err != nil {
			b.Fatalf("fill: %v", err)
		}
		for _, r := range resp.Msg.Results {
			if e := r.GetError(); e != nil {
				b.Fatalf("fill: %s", e.Message)
			}
		}
	}
}

// memory reads a process's resident set and its peak, in bytes.
func memory(b *testing.B, pid int) (rss, hwm int64) {
	b.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}
