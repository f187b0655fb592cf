//go:build unix

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/fence"
)

// The paused holder, scaled down: a 1 s TTL instead of the 5 s of the
// incident.
const (
	gcTTL   = time.Second
	gcStock = 10
	// gcPrepare is how long holder A works between reading the stock and
	// writing it: the demo stops A (SIGSTOP) during this time.
	gcPrepare = 300 * time.Millisecond
)

// gcParams is what holder A's process needs to know.
type gcParams struct {
	Variant  string `json:"variant"`
	Resource string `json:"resource"`
	Store    string `json:"store"`
}

// gcHolding is A's event: it holds the lock and is about to write.
type gcHolding struct {
	Token uint64 `json:"token"`
	Read  int64  `json:"read"`
}

// gcWrite is how a holder's write ended.
type gcWrite struct {
	Token    uint64 `json:"token"`
	Wrote    int64  `json:"wrote"`
	Accepted bool   `json:"accepted"`
	Refusal  string `json:"refusal,omitempty"`
	LeaseErr string `json:"lease_err,omitempty"` // the lease's state when A wrote
}

// gcStore is the inventory row both holders write, plainly or through a
// fencing guard.
type gcStore struct {
	p     gcParams
	env   *environment
	pg    *fence.Postgres
	redis *fence.Redis
}

func newGCStore(env *environment, p gcParams) (*gcStore, error) {
	s := &gcStore{p: p, env: env}
	var err error
	if p.Variant == "fence" {
		if p.Store == "postgres" {
			s.pg, err = fence.NewPostgres()
		} else {
			s.redis, err = fence.NewRedis(env.rc)
		}
	}
	return s, err
}

func (s *gcStore) key() string { return fence.DataKey(s.p.Resource, "stock") }

func (s *gcStore) reset(ctx context.Context) error {
	if s.p.Store == "postgres" {
		if err := fence.Migrate(ctx, s.env.pool); err != nil {
			return err
		}
		_, err := s.env.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS turnstile_demo_stock (item text PRIMARY KEY, stock bigint NOT NULL)`)
		if err == nil {
			_, err = s.env.pool.Exec(ctx, `INSERT INTO turnstile_demo_stock (item, stock) VALUES ($1, $2)
				ON CONFLICT (item) DO UPDATE SET stock = EXCLUDED.stock`, s.p.Resource, gcStock)
		}
		return err
	}
	return s.env.rc.Do(ctx, s.env.rc.B().Set().Key(s.key()).Value(strconv.Itoa(gcStock)).Build()).Error()
}

func (s *gcStore) read(ctx context.Context) (int64, error) {
	if s.p.Store == "postgres" {
		var n int64
		err := s.env.pool.QueryRow(ctx, `SELECT stock FROM turnstile_demo_stock WHERE item = $1`, s.p.Resource).Scan(&n)
		return n, err
	}
	return s.env.rc.Do(ctx, s.env.rc.B().Get().Key(s.key()).Build()).AsInt64()
}

// write stores n as the stock, with token for the fenced variant. A stale
// token gives an error matching fence.ErrStaleToken.
func (s *gcStore) write(ctx context.Context, token uint64, n int64) error {
	switch {
	case s.p.Store == "postgres":
		return pgx.BeginFunc(ctx, s.env.pool, func(tx pgx.Tx) error {
			if s.pg != nil {
				if err := s.pg.Check(ctx, tx, s.p.Resource, token); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `UPDATE turnstile_demo_stock SET stock = $2 WHERE item = $1`, s.p.Resource, n)
			return err
		})
	case s.redis != nil:
		return s.redis.Set(ctx, s.p.Resource, token, s.key(), strconv.FormatInt(n, 10))
	default:
		return s.env.rc.Do(ctx, s.env.rc.B().Set().Key(s.key()).Value(strconv.FormatInt(n, 10)).Build()).Error()
	}
}

// sell is one holder's sale: write stock-1 and say how it went.
func (s *gcStore) sell(ctx context.Context, l *turnstile.Lease, read int64) (gcWrite, error) {
	w := gcWrite{Token: l.Token(), Wrote: read - 1}
	if err := l.Context().Err(); err != nil {
		w.LeaseErr = context.Cause(l.Context()).Error()
	}
	err := s.write(ctx, l.Token(), read-1)
	switch {
	case err == nil:
		w.Accepted = true
	case errors.Is(err, fence.ErrStaleToken):
		w.Refusal = err.Error()
	default:
		return w, err
	}
	return w, nil
}

// gcPauseWorker is holder A: it takes the lock, reads the stock, says so,
// and writes after gcPrepare — unaware that it was stopped in between.
func gcPauseWorker(ctx context.Context, env *environment, spec workerSpec, w *workerLink) (any, error) {
	var p gcParams
	if err := json.Unmarshal(spec.Params, &p); err != nil {
		return nil, err
	}
	s, err := newGCStore(env, p)
	if err != nil {
		return nil, err
	}
	c, err := env.newClient(turnstile.WithTTL(gcTTL), turnstile.WithInstanceID("holder-A"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := w.ready(ctx); err != nil {
		return nil, err
	}
	l, err := c.Acquire(ctx, "lock:"+p.Resource)
	if err != nil {
		return nil, err
	}
	defer func() { _ = l.Release(context.WithoutCancel(ctx)) }()
	read, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	w.event(gcHolding{Token: l.Token(), Read: read})
	// The pause hits here, like a stop-the-world GC between the read and
	// the write.
	if err := sleepCtx(ctx, gcPrepare); err != nil {
		return nil, err
	}
	return s.sell(ctx, l, read)
}

// runGCPause runs the pause without and with fencing.
func runGCPause(ctx context.Context, env *environment) ([]result, error) {
	return runVariants(ctx, env, []string{"naive", "fence"}, runGCVariant)
}

func runGCVariant(ctx context.Context, env *environment, variant string) (result, error) {
	p := gcParams{Variant: variant, Resource: "inventory:42-" + variant, Store: env.store()}
	s, err := newGCStore(env, p)
	if err != nil {
		return result{}, err
	}
	if err := s.reset(ctx); err != nil {
		return result{}, err
	}
	c, err := env.newClient(turnstile.WithTTL(gcTTL), turnstile.WithInstanceID("holder-B"))
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	raw, _ := json.Marshal(p)
	g, err := startWorkers(ctx, env, []workerSpec{{Scenario: "gc-pause", Variant: variant, Params: raw}})
	if err != nil {
		return result{}, err
	}
	defer g.Close()
	a := g.procs[0]
	g.goAll()

	var holding gcHolding
	select {
	case ev := <-g.events:
		if err := json.Unmarshal(ev.payload, &holding); err != nil {
			return result{}, err
		}
	case <-a.exited:
		return result{}, a.failure()
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	if err := syscall.Kill(a.pid(), syscall.SIGSTOP); err != nil {
		return result{}, fmt.Errorf("pause holder A: %w", err)
	}
	stopped := time.Now()
	env.progress("gc-pause %s: holder A (pid %d) holds token %d and read stock %d; stopped it (SIGSTOP) before its write", variant, a.pid(), holding.Token, holding.Read)
	// A must really be stopped before its write: otherwise the run shows
	// nothing.
	if n, err := s.read(ctx); err != nil || n != holding.Read {
		return result{}, fmt.Errorf("holder A wrote before it could be stopped (stock %d, err %v): the machine is too loaded for this scenario", n, err)
	}

	wait, cancel := context.WithTimeout(ctx, 10*gcTTL)
	defer cancel()
	lb, err := c.Acquire(wait, "lock:"+p.Resource, turnstile.WithBackoff(turnstile.Exponential{Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond, MaxRetries: -1}))
	if err != nil {
		return result{}, fmt.Errorf("holder B: %w", err)
	}
	env.progress("gc-pause %s: A's lease expired; holder B acquired with token %d after %v", variant, lb.Token(), time.Since(stopped).Round(time.Millisecond))
	readB, err := s.read(ctx)
	if err != nil {
		return result{}, err
	}
	wb, err := s.sell(ctx, lb, readB)
	if err != nil {
		return result{}, fmt.Errorf("holder B's write: %w", err)
	}
	_ = lb.Release(ctx)

	if err := syscall.Kill(a.pid(), syscall.SIGCONT); err != nil {
		return result{}, fmt.Errorf("resume holder A: %w", err)
	}
	env.progress("gc-pause %s: resumed A (SIGCONT) after %v; it writes with its old token", variant, time.Since(stopped).Round(time.Millisecond))
	var wa gcWrite
	if err := g.wait(ctx, &wa); err != nil {
		return result{}, err
	}
	final, err := s.read(ctx)
	if err != nil {
		return result{}, err
	}

	r := result{Variant: variant, Naive: variant == "naive"}
	accepted := 0
	for _, w := range []gcWrite{wa, wb} {
		if w.Accepted {
			accepted++
		}
	}
	r.OK = !wa.Accepted && wb.Accepted
	switch {
	case wa.Accepted:
		r.Summary = fmt.Sprintf("A's late write landed after B's: both wrote stock %d (tokens %d and %d), two sales, stock decremented once", wa.Wrote, wa.Token, wb.Token)
	case wa.Refusal != "":
		r.Summary = fmt.Sprintf("A's late write rejected: token %d < %d (B's); one sale, stock %d", wa.Token, wb.Token, final)
	default:
		r.Summary = fmt.Sprintf("B's write was not accepted; stock %d", final)
	}
	r.add("store", p.Store)
	r.add("ttl_ms", gcTTL.Milliseconds())
	r.add("token_a", wa.Token)
	r.add("token_b", wb.Token)
	r.add("a_accepted", wa.Accepted)
	r.add("b_accepted", wb.Accepted)
	r.add("writes_accepted", accepted)
	r.add("stock_before", gcStock)
	r.add("final_stock", final)
	if wa.Refusal != "" {
		r.add("a_refusal", wa.Refusal)
	}
	if wa.LeaseErr != "" {
		r.add("a_lease", wa.LeaseErr)
	}
	return r, nil
}
