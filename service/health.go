package service

import (
	"context"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/grpchealth"

	"github.com/turnstilelock/turnstile/driver"
)

// Readiness reflects the store: an instance whose store does not answer
// cannot serve a lock, and a load balancer should send its calls
// elsewhere. The store is asked at most once a probeEvery, however often
// the probes come, with one Inspect of a key nobody uses (stores that
// cannot inspect are taken to be up).

const (
	probeEvery   = time.Second
	probeTimeout = 2 * time.Second
	probeKey     = "turnstile:serve:readyz"
)

type prober struct {
	mu   sync.Mutex
	last time.Time
	err  error
}

// storeReady asks the store, or answers from the last probe.
func (s *Server) storeReady(ctx context.Context) error {
	p := &s.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < probeEvery {
		return p.err
	}
	in, ok := s.cfg.Backend.(driver.Inspector)
	if !ok {
		p.last, p.err = time.Now(), nil
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := in.Inspect(ctx, probeKey)
	p.last, p.err = time.Now(), err
	s.storeOK.Store(err == nil)
	return err
}

// ready serves /readyz: 200 while the instance serves and its store
// answers, 503 otherwise.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	switch {
	case s.draining.Load():
		http.Error(w, "draining", http.StatusServiceUnavailable)
	case s.storeReady(r.Context()) != nil:
		s.cfg.Logger.Warn("turnstile serve: not ready: the store does not answer", "err", s.probe.err)
		http.Error(w, "the lock store does not answer", http.StatusServiceUnavailable)
	default:
		_, _ = w.Write([]byte("ready\n"))
	}
}

// health answers gRPC health checks as /readyz does.
type health struct{ s *Server }

func (h *health) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	status := grpchealth.StatusServing
	if h.s.draining.Load() || h.s.storeReady(ctx) != nil {
		status = grpchealth.StatusNotServing
	}
	return &grpchealth.CheckResponse{Status: status}, nil
}
