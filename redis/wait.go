package redis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
)

// DefaultWaitTimeout is how long a grant or renewal waits for the
// replicas WithWaitReplicas asks for when no timeout is given (a URL's
// wait_replicas without wait_timeout): long enough for a replica on the
// same network to acknowledge, short enough that a replica that is down
// costs an acquisition little more than a round trip.
const DefaultWaitTimeout = 100 * time.Millisecond

// maxWaitReplicas and maxWaitTimeout bound WithWaitReplicas: no
// deployment has more replicas per primary, and an acquisition that
// waits longer for them is an outage, not a wait.
const (
	maxWaitReplicas = 100
	maxWaitTimeout  = time.Minute
)

// WithWaitReplicas makes every write that grants or renews a lock wait
// until n replicas of the primary have it (Redis's WAIT), at most timeout
// (0: DefaultWaitTimeout). A grant that fewer replicas confirm in time
// is released again and Acquire returns a *ReplicationError, which a
// turnstile.Client treats as it treats an outage of the store: it tries
// again until its context ends. A renewal that fewer replicas confirm
// returns a *ReplicationError too, and the lease's watchdog retries it.
//
// A grant confirmed by n replicas survives a failover to any of them, so
// with n=1 and one replica a failover no longer frees a lock that was
// granted. WAIT does not make Redis strongly consistent: a failover to a
// replica that had not acknowledged still loses the write, and a primary
// that restarts without persistence loses it too (docs/guarantees.md).
//
// The grant and its WAIT go on one connection, as WAIT counts the writes
// of the connection it is sent on: so WithWaitReplicas needs a rueidis
// client of a single primary or a Sentinel-managed one (New, Dial, or a
// URL), not go-redis and not a Redis Cluster. n must lie in [0, 100] (0:
// off, the default), timeout in [0, 1 min].
func WithWaitReplicas(n int, timeout time.Duration) Option {
	return func(c *config) error {
		if n < 0 || n > maxWaitReplicas {
			return fmt.Errorf("%w: wait replicas %d is outside [0, %d]", turnstile.ErrInvalidOption, n, maxWaitReplicas)
		}
		if timeout < 0 || timeout > maxWaitTimeout {
			return fmt.Errorf("%w: wait timeout %v is outside [0, %v]", turnstile.ErrInvalidOption, timeout, maxWaitTimeout)
		}
		if timeout == 0 {
			timeout = DefaultWaitTimeout
		}
		c.wait = waitConfig{replicas: n, timeout: timeout}
		return nil
	}
}

// waitConfig is the setting of WithWaitReplicas; the zero value is off.
type waitConfig struct {
	replicas int
	timeout  time.Duration
}

// WaitReplicas returns the setting of WithWaitReplicas: how many replicas
// every grant and renewal waits for (0: none) and for how long at most.
func (b *Backend) WaitReplicas() (int, time.Duration) {
	return b.cfg.wait.replicas, b.cfg.wait.timeout
}

// ReplicationError is the error of a grant or renewal that fewer replicas
// confirmed within the wait timeout than WithWaitReplicas asks for. A
// grant that returns it was released again; it is retried as an outage
// of the store is.
type ReplicationError struct {
	Server    string        // the backend's Name
	Op        string        // "acquire" or "extend"
	Wanted    int           // replicas asked for
	Confirmed int           // replicas that acknowledged in time
	Timeout   time.Duration // how long the primary waited
}

func (e *ReplicationError) Error() string {
	return fmt.Sprintf("%s: %s: %d of %d replicas confirmed the write within %v (wait_replicas=%d): a failover now could lose it",
		e.Server, e.Op, e.Confirmed, e.Wanted, e.Timeout, e.Wanted)
}

// checkWait refuses WithWaitReplicas on a client it cannot work with:
// go-redis, whose scripts and WAIT this backend cannot keep on one
// connection, and a Redis Cluster, whose WAIT would reach any node.
func checkWait(c conn, cfg config) error {
	if cfg.wait.replicas == 0 {
		return nil
	}
	rc, ok := c.(*rueidisConn)
	if !ok {
		return fmt.Errorf("%w: wait replicas needs a rueidis client (New or Dial), not %T", turnstile.ErrInvalidOption, c)
	}
	if rc.c.Mode() == rueidis.ClientModeCluster {
		return fmt.Errorf("%w: wait replicas is not supported on a Redis Cluster: use one primary or Sentinel (redis+sentinel://)", turnstile.ErrInvalidOption)
	}
	rc.wait = cfg.wait
	return nil
}

// scriptSHA is the SHA-1 of a script's source, which EVALSHA names.
func scriptSHA(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// plainSHA are the SHA-1s of the plain lock's scripts.
var plainSHA = func() (s [numScripts]string) {
	for i, src := range sources {
		s[i] = scriptSHA(src)
	}
	return s
}()

// evalWait runs the script src (whose SHA-1 is sha) once per call and
// then WAIT, all on one connection: WAIT counts the writes of the
// connection it is sent on, and rueidis would send a lone WAIT, a
// blocking command, on another connection than the scripts. A call whose
// reply is positive wrote a grant or a renewal: if fewer replicas than
// asked confirmed it, its reply becomes a *ReplicationError (or the
// error of WAIT itself, such as a connection lost), marked unconfirmed. The server
// loses its script cache on a restart: the calls it refused with NOSCRIPT
// are sent again with their source, followed by WAIT again.
func (r *rueidisConn) evalWait(ctx context.Context, src, sha string, cs []call, op string) []reply {
	out := make([]reply, len(cs))
	ms := r.wait.timeout.Milliseconds()
	_ = r.c.Dedicated(func(d rueidis.DedicatedClient) error {
		pending := make([]int, len(cs)) // indexes into cs still to run
		for i := range pending {
			pending[i] = i
		}
		for attempt := 0; len(pending) > 0; attempt++ {
			cmds := make(rueidis.Commands, 0, len(pending)+1)
			for _, i := range pending {
				c := cs[i]
				if attempt == 0 {
					cmds = append(cmds, evalsha(d.B(), sha, c))
				} else {
					cmds = append(cmds, d.B().Eval().Script(src).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build())
				}
			}
			cmds = append(cmds, d.B().Wait().Numreplicas(int64(r.wait.replicas)).Timeout(ms).Build())
			res := d.DoMulti(ctx, cmds...)
			acked, werr := res[len(res)-1].AsInt64()
			var again []int
			for j, i := range pending {
				n, err := res[j].AsInt64()
				if attempt == 0 && noScript(err) {
					again = append(again, i)
					continue
				}
				out[i] = reply{n: n, err: err}
				if err == nil && n > 0 && (werr != nil || acked < int64(r.wait.replicas)) {
					out[i] = reply{err: &ReplicationError{Server: "redis " + r.addr(), Op: op, Wanted: r.wait.replicas, Confirmed: int(acked), Timeout: r.wait.timeout}, unconfirmed: true}
					if werr != nil {
						out[i].err = fmt.Errorf("redis: %s: wait for %d replicas: %w", op, r.wait.replicas, werr)
					}
				}
			}
			pending = again
		}
		return nil
	})
	for i := range out {
		out[i].err = storeError(out[i].err, src, cs[i], "")
	}
	return out
}

// noScript reports whether err is the server's NOSCRIPT reply: it does
// not have the script (it restarted, or SCRIPT FLUSH ran).
func noScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.HasPrefix(re.Error(), "NOSCRIPT")
}

// waits reports whether grants and renewals wait for replicas.
func (b *Backend) waits() bool { return b.cfg.wait.replicas > 0 }

// grant runs a script that may grant a lock (src, whose SHA-1 is sha)
// and waits for its replicas (evalWait); undo releases the grant when
// too few replicas confirmed it.
func (b *Backend) grant(ctx context.Context, src, sha string, c call, undo func(context.Context)) (int64, error) {
	rep := b.conn.(*rueidisConn).evalWait(ctx, src, sha, []call{c}, "acquire")[0]
	if rep.unconfirmed {
		b.undo(undo)
	}
	return rep.n, rep.err
}

// undoTimeout bounds the release of a grant that too few replicas
// confirmed.
const undoTimeout = 2 * time.Second

// undo runs the release of a grant that too few replicas confirmed,
// detached from the caller's context (which may be done): the lock is
// then free at once rather than after its TTL.
func (b *Backend) undo(release func(context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	release(ctx)
}
