package etcd

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Lease renewals share one stream. etcd renews a lease only on a
// LeaseKeepAlive stream, and clientv3's KeepAliveOnce opens a stream per
// renewal. A client with a user name logs in again (Authenticate)
// whenever it opens a stream, and etcd checks every login's password
// with bcrypt, milliseconds of its CPU each: with a stream per renewal,
// a burst of waiters — each renewing its waiting lease, and each lease
// renewed once more right after its grant — made a login apiece,
// saturated etcd, and the holder's renewal queued behind them past its
// deadline. The backend keeps one stream open for all its renewals
// instead: one login per stream, and a new stream only when the last
// one failed.

// errClosed answers a renewal after Close.
var errClosed = errors.New("etcd: backend closed")

// renewRetry is the pause before a renewal tries again on a new stream
// after the stream it was sent on failed in a way that passes (no
// leader, a connection lost).
const renewRetry = 100 * time.Millisecond

// renewer sends the backend's lease renewals on one LeaseKeepAlive
// stream, opened on the first renewal and again after a failure.
type renewer struct {
	lc      pb.LeaseClient
	opening chan struct{} // a token: its holder is the one caller opening a stream
	wg      sync.WaitGroup

	mu     sync.Mutex
	cur    *keepAlives // the last stream opened, or nil
	closed bool
}

func newRenewer(cli *clientv3.Client) *renewer {
	return &renewer{lc: pb.NewLeaseClient(cli.ActiveConnection()), opening: make(chan struct{}, 1)}
}

// renew renews lease id and returns its TTL in seconds as etcd granted
// it. A lease etcd does not know is rpctypes.ErrLeaseNotFound. As
// KeepAliveOnce does, it tries again while the errors pass, until ctx
// ends.
func (r *renewer) renew(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	for {
		ttl, err := r.renewOnce(ctx, id)
		if err == nil {
			if ttl <= 0 {
				return 0, rpctypes.ErrLeaseNotFound
			}
			return ttl, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if !passing(err) {
			return 0, rpctypes.Error(err)
		}
		t := time.NewTimer(renewRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// passing reports whether err is one that a new stream may not meet:
// etcd's Unavailable (no leader, no connection) or Internal (a broken
// frame), as clientv3 retries them.
func passing(err error) bool {
	code := status.Code(err)
	return code == codes.Unavailable || code == codes.Internal
}

func (r *renewer) renewOnce(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	s, err := r.stream(ctx)
	if err != nil {
		return 0, err
	}
	answer := s.send(int64(id))
	select {
	case a := <-answer:
		return a.ttl, a.err
	case <-ctx.Done():
		// The answer, when it comes, goes to the channel's buffer.
		return 0, ctx.Err()
	}
}

// stream returns the open stream, or opens one: one caller at a time
// opens, the others wait for it, and none waits past its ctx.
func (r *renewer) stream(ctx context.Context) (*keepAlives, error) {
	if s, err := r.current(); s != nil || err != nil {
		return s, err
	}
	select {
	case r.opening <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.opening }()
	// The caller that held the token before may have opened one.
	if s, err := r.current(); s != nil || err != nil {
		return s, err
	}
	return r.open(ctx)
}

// current is the open stream, nil if there is none, or errClosed.
func (r *renewer) current() (*keepAlives, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errClosed
	}
	if r.cur != nil && r.cur.failure() == nil {
		return r.cur, nil
	}
	return nil, nil
}

// open opens a stream for the backend's life. Opening waits for a
// connection and logs in, as long as ctx allows: an open that outlasts
// its caller is abandoned.
func (r *renewer) open(ctx context.Context) (*keepAlives, error) {
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	stream, err := r.lc.LeaseKeepAlive(sctx, grpc.WaitForReady(true))
	if !stop() {
		cancel()
		return nil, ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	s := &keepAlives{
		stream:  stream,
		cancel:  cancel,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		waiting: make(map[int64][]chan answer),
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		cancel()
		return nil, errClosed
	}
	r.cur = s
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		s.sendLoop()
	}()
	go func() {
		defer r.wg.Done()
		s.recvLoop()
	}()
	return s, nil
}

// close ends the stream and waits for its goroutines; later renewals
// fail with errClosed.
func (r *renewer) close() {
	r.mu.Lock()
	r.closed = true
	if r.cur != nil {
		r.cur.fail(errClosed)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// keepAlives is one LeaseKeepAlive stream: the renewals waiting for the
// sender, and the callers waiting for etcd's answers, per lease in the
// order sent, the order in which etcd answers a stream.
type keepAlives struct {
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc
	wake   chan struct{} // one signal: there are renewals to send
	done   chan struct{} // closed when the stream has failed

	mu      sync.Mutex
	unsent  []int64
	waiting map[int64][]chan answer
	err     error // why the stream failed; nil while it works
}

// answer is etcd's answer to one renewal: the lease's TTL (0: no such
// lease) or the stream's failure.
type answer struct {
	ttl int64
	err error
}

// send queues a renewal of lease id and returns the channel its answer
// arrives on.
func (s *keepAlives) send(id int64) <-chan answer {
	ch := make(chan answer, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		ch <- answer{err: s.err}
		return ch
	}
	s.waiting[id] = append(s.waiting[id], ch)
	s.unsent = append(s.unsent, id)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return ch
}

// sendLoop sends the queued renewals. It alone sends on the stream, as
// gRPC requires; a caller never waits for a send, so a stalled
// connection holds nobody past their context.
func (s *keepAlives) sendLoop() {
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		ids := s.unsent
		s.unsent = nil
		s.mu.Unlock()
		for _, id := range ids {
			if err := s.stream.Send(&pb.LeaseKeepAliveRequest{ID: id}); err != nil {
				if !errors.Is(err, io.EOF) {
					s.fail(err)
				}
				// io.EOF: the stream ended, and recvLoop learns why.
				return
			}
		}
	}
}

// recvLoop hands etcd's answers to the callers, each to the earliest
// caller waiting for that lease.
func (s *keepAlives) recvLoop() {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		if q := s.waiting[resp.ID]; len(q) > 0 {
			q[0] <- answer{ttl: resp.TTL}
			if len(q) == 1 {
				delete(s.waiting, resp.ID)
			} else {
				s.waiting[resp.ID] = q[1:]
			}
		}
		s.mu.Unlock()
	}
}

// fail ends the stream with err, the first failure only, and answers
// every caller still waiting with it.
func (s *keepAlives) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		close(s.done)
		for _, q := range s.waiting {
			for _, ch := range q {
				ch <- answer{err: err}
			}
		}
		s.waiting, s.unsent = nil, nil
	}
	s.mu.Unlock()
	s.cancel()
}

// failure is why the stream failed, or nil while it works.
func (s *keepAlives) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
