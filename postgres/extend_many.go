package postgres

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

//go:embed extend_many.sql
var extendManySQL string

var _ driver.BatchExtender = (*Backend)(nil)

// ExtendMany implements driver.BatchExtender: one UPDATE per lock
// connection, the connections in parallel.
func (b *Backend) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	res := make([]driver.ExtendResult, len(reqs))
	byShard := map[*shard][]int{}
	for i, r := range reqs {
		s := b.shard(b.lockID(r.Key))
		byShard[s] = append(byShard[s], i)
	}
	var wg sync.WaitGroup
	for s, idx := range byShard {
		wg.Go(func() { b.extendShard(ctx, s, reqs, idx, res) })
	}
	wg.Wait()
	return res
}

// extendShard performs the requests idx, all of keys on s, and fills in
// their results.
func (b *Backend) extendShard(ctx context.Context, s *shard, reqs []driver.ExtendRequest, idx []int, res []driver.ExtendResult) {
	fail := func(err error) {
		for _, i := range idx {
			res[i] = driver.ExtendResult{Err: err}
		}
	}
	if err := ctx.Err(); err != nil {
		fail(err)
		return
	}
	if err := s.lock(ctx); err != nil {
		fail(err)
		return
	}
	defer s.unlock()
	if s.held == nil {
		fail(errClosed)
		return
	}
	start := time.Now()
	var keys, owners []string
	var ttls []int64
	var asked []int
	for _, i := range idx {
		r := reqs[i]
		h := s.held[r.Key]
		if h == nil || h.owner != r.Owner || h.gen != s.gen || !start.Before(h.deadline) {
			continue // not held: OK stays false
		}
		keys, owners, ttls = append(keys, r.Key), append(owners, r.Owner), append(ttls, r.TTL.Milliseconds())
		asked = append(asked, i)
	}
	if len(asked) == 0 {
		return
	}
	fail = func(err error) {
		for _, i := range asked {
			res[i] = driver.ExtendResult{Err: err}
		}
	}
	conn, qctx, cancel, err := s.session(ctx)
	if err != nil {
		fail(fmt.Errorf("%s: %w", b.name, permission(err)))
		return
	}
	defer cancel()
	gen := s.gen
	rows, err := conn.Query(qctx, extendManySQL, keys, owners, ttls)
	if err != nil {
		s.failed()
		fail(fmt.Errorf("%s: extend: %w", b.name, permission(err)))
		return
	}
	extended := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			s.failed()
			fail(fmt.Errorf("%s: extend: %w", b.name, permission(err)))
			return
		}
		extended[k] = true
	}
	if err := rows.Err(); err != nil {
		s.failed()
		fail(fmt.Errorf("%s: extend: %w", b.name, permission(err)))
		return
	}
	var (
		lost     []int64
		lostKeys []string
	)
	for _, i := range asked {
		r := reqs[i]
		h := s.held[r.Key]
		if h == nil || h.gen != gen {
			continue // the session was replaced meanwhile; OK stays false
		}
		if !extended[r.Key] {
			// Removed behind our back: let others have the advisory lock too.
			h.timer.Stop()
			delete(s.held, r.Key)
			lost = append(lost, h.hash)
			lostKeys = append(lostKeys, r.Key)
			continue
		}
		h.deadline = start.Add(r.TTL)
		s.arm(r.Key, h, r.TTL)
		res[i].OK = true
	}
	if len(lost) > 0 {
		// And tell their waiters that the advisory locks went.
		if _, err := conn.Exec(qctx, "SELECT pg_advisory_unlock(h), pg_notify('turnstile_released', k) FROM unnest($1::bigint[], $2::text[]) AS u(h, k)", lost, lostKeys); err != nil {
			s.failed()
		}
	}
}
