package service_test

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile/internal/testserver"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// TestServeDrain: SIGTERM makes "turnstile serve" drain: a Hold stream
// is told with its lease, which stays held in the store (the client
// resumes it on another instance); a waiting Acquire and a Watch end with
// UNAVAILABLE, DRAINING; the process exits 0. Its metrics, served beside
// the API, count what it did, the library's too.
func TestServeDrain(t *testing.T) {
	srv := testserver.StartRedis(t)
	a := startServe(t, "--backend", srv.URL(), "--metrics-addr", "same")
	b := startServe(t, "--backend", srv.URL())
	ca, cb := clientsOf(t, a.addr), clientsOf(t, b.addr)
	ctx := ctxFor(t, 2*time.Minute)

	hold, g := holdStream(t, ctx, ca, &v1.HoldRequest{Key: "drain:held", Ttl: durationpb.New(20 * time.Second)})
	busy, err := cb.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "drain:busy"}))
	if err != nil {
		t.Fatal(err)
	}
	_ = busy
	waited := make(chan error, 1)
	go func() {
		_, err := ca.locks.Acquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "drain:busy", Wait: durationpb.New(time.Minute)}))
		waited <- err
	}()
	watch, _ := watchStream(t, ca, &v1.WatchRequest{Key: "drain:", Prefix: true})
	if _, err := ca.locks.TryAcquire(ctx, connect.NewRequest(&v1.AcquireRequest{Key: "other"})); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get("http://" + a.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"turnstile_serve_holds 1", `turnstile_serve_calls_total{code="ok",method="TryAcquire",tenant="-"}`, "turnstile_acquisitions_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	a.signal(t, syscall.SIGTERM)
	var d *v1.Ended
	for hold.Receive() {
		if d = hold.Msg().GetDraining(); d != nil {
			break
		}
	}
	if d == nil || d.Lease.GetOwner() != g.Lease.Owner {
		t.Fatalf("Hold on the draining instance: %v %v; want Draining with its lease", d, hold.Err())
	}
	wantReason(t, "an Acquire waiting on the draining instance", <-waited, connect.CodeUnavailable, "DRAINING")
	for watch.Receive() {
	}
	wantReason(t, "a Watch on the draining instance", watch.Err(), connect.CodeUnavailable, "DRAINING")
	if err := a.wait(t, 30*time.Second); err != nil {
		t.Fatalf("turnstile serve after SIGTERM: %v\n%s", err, a.output())
	}
	if !strings.Contains(a.output(), "drained") {
		t.Fatalf("no word of the drain:\n%s", a.output())
	}
	st, err := cb.locks.Status(ctx, connect.NewRequest(&v1.StatusRequest{Key: "drain:held"}))
	if err != nil || !st.Msg.State.Held || st.Msg.State.Holders[0].Owner != g.Lease.Owner {
		t.Fatalf("the drained Hold's lock: %v, %v; want still held by %s", st, err, g.Lease.Owner)
	}
	_, g2 := holdStream(t, ctx, cb, &v1.HoldRequest{Resume: d.Lease})
	if g2.Lease.Owner != g.Lease.Owner || g2.Lease.Token <= g.Lease.Token {
		t.Fatalf("resumed on the other instance: %v", g2.Lease)
	}
}
