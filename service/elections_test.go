package service_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/turnstilelock/turnstile/memory"
	"github.com/turnstilelock/turnstile/service"
	"github.com/turnstilelock/turnstile/service/apierr"
	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// TestElections: a candidate leads while its Campaign stream is open;
// Leader and Observe (on another instance) say who leads; a second
// candidate waits; Resign by the leader's lease on another instance
// elects the second at once, with a greater term; closing the second's
// stream resigns too.
func TestElections(t *testing.T) {
	store := memory.New()
	a := clientsOf(t, startInstance(t, service.Config{Backend: store}).addr)
	b := clientsOf(t, startInstance(t, service.Config{Backend: store}).addr)
	const name = "election:scheduler"
	ctx := ctxFor(t, time.Minute)

	first, err := a.elections.Campaign(ctx, connect.NewRequest(&v1.CampaignRequest{Name: name, Value: "10.0.0.7:8080", Ttl: durationpb.New(10 * time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if !first.Receive() || first.Msg().GetElected() == nil {
		t.Fatalf("first candidate: %v %v, want Elected", first.Msg(), first.Err())
	}
	lead := first.Msg().GetElected()
	if lead.Term != lead.Lease.Token || lead.Lease.Key != name {
		t.Fatalf("Elected %v: the term is the lease's token", lead)
	}
	ld, err := b.elections.Leader(ctx, connect.NewRequest(&v1.LeaderRequest{Name: name}))
	if err != nil || !ld.Msg.Leader.Elected || ld.Msg.Leader.Value != "10.0.0.7:8080" || ld.Msg.Leader.Term != lead.Term {
		t.Fatalf("Leader = %v, %v; want 10.0.0.7:8080 in term %d", ld, err, lead.Term)
	}
	octx, stopObserve := context.WithCancel(ctx)
	defer stopObserve()
	obs, err := b.elections.Observe(octx, connect.NewRequest(&v1.ObserveRequest{Name: name, Interval: durationpb.New(50 * time.Millisecond)}))
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	if !obs.Receive() || obs.Msg().Leader.Value != "10.0.0.7:8080" {
		t.Fatalf("Observe's first report: %v %v", obs.Msg(), obs.Err())
	}

	second, err := b.elections.Campaign(ctx, connect.NewRequest(&v1.CampaignRequest{Name: name, Value: "10.0.0.8:8080"}))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	elected := make(chan *v1.Elected, 1)
	go func() {
		for second.Receive() {
			if e := second.Msg().GetElected(); e != nil {
				elected <- e
				break
			}
		}
		close(elected)
	}()
	select {
	case e := <-elected:
		t.Fatalf("second candidate elected while the first leads: %v", e)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := b.elections.Resign(ctx, connect.NewRequest(&v1.ResignRequest{Lease: lead.Lease})); err != nil {
		t.Fatalf("Resign on another instance: %v", err)
	}
	e := <-elected
	if e == nil || e.Term <= lead.Term {
		t.Fatalf("second candidate: %v, want elected with a term above %d", e, lead.Term)
	}
	for obs.Receive() {
		if l := obs.Msg().Leader; l.Elected && l.Value == "10.0.0.8:8080" {
			if l.Term != e.Term {
				t.Fatalf("Observe reports term %d, the leader has %d", l.Term, e.Term)
			}
			break
		}
	}
	// The first stream learns it no longer leads.
	for first.Receive() {
		if first.Msg().GetLost() != nil {
			break
		}
	}
	if _, err := a.elections.Resign(ctx, connect.NewRequest(&v1.ResignRequest{Lease: lead.Lease})); apierr.Reason(err) != "NOT_HELD" {
		t.Fatalf("Resign of a term over: %v, want NOT_HELD", err)
	}
	_ = second.Close() // resigns
	for obs.Receive() {
		if !obs.Msg().Leader.Elected {
			return
		}
	}
	t.Fatalf("Observe did not report the resignation: %v", obs.Err())
}
