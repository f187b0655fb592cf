package main

import (
	"context"
	"errors"
	"time"

	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// crashMember crashes m: through its launcher for a redis-server (which
// must know the server is down; SIGKILL leaves its append-only file, if
// it keeps one, for the restart), else with crash, which leaves the data
// directory for the restart.
func crashMember(m *member) error {
	if s, ok := m.ctl.(*redisproc.Server); ok {
		s.Kill()
		return nil
	}
	return crash(m)
}

// restart brings a crashed member back, and tells it its place in a
// configuration that must (rejoiner).
func (env *faultEnv) restart(m *member) func() error {
	return func() error {
		if err := m.ctl.Restart(); err != nil {
			return err
		}
		if r, ok := env.t.(rejoiner); ok {
			return r.rejoin(m)
		}
		return nil
	}
}

// failover reproduces a lost grant: the replica is stopped, so that a
// grant made now on the primary does not reach it; a worker takes the
// lock and holds it (a long hold, past the fault); the primary is killed
// and the replica resumed, and the Sentinels or the cluster promote it —
// without the grant, so another worker is granted the same lock. The heal
// restarts the old primary, which rejoins as a replica. With
// wait_replicas=1 the grant is refused while the replica is stopped, and
// the long holder never appears.
func failover(ctx context.Context, env *faultEnv) (func() error, error) {
	t, ok := env.t.(failoverer)
	if !ok {
		return nil, errors.New("the configuration has no replicas to fail over to")
	}
	old := env.primary()
	replica, err := t.replicaOf(old)
	if err != nil {
		return nil, err
	}
	if err := replica.Pause(); err != nil {
		return nil, err
	}
	// Cut the stopped replica off, or it would find the grant in its
	// socket's buffer when it runs again.
	if s, ok := old.ctl.(*redisproc.Server); ok {
		if _, err := s.Do("CLIENT", "KILL", "TYPE", "replica"); err != nil {
			_ = replica.Resume()
			return nil, err
		}
	}
	// From here the primary's grants reach no replica, and after the
	// failover the new primary has none until the heal.
	env.cut = time.Now().UnixNano()
	// The grant the failover loses; with wait_replicas none is made.
	_, _ = env.pool.longHolder(ctx, 3*env.ttl)
	if err := crashMember(old); err != nil {
		_ = replica.Resume()
		return nil, err
	}
	if err := replica.Resume(); err != nil {
		return nil, err
	}
	if err := t.awaitFailover(old); err != nil {
		return nil, err
	}
	return env.restart(old), nil
}
