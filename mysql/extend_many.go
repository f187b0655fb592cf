package mysql

import (
	"context"
	_ "embed"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/driver"
)

var (
	//go:embed sql/extend_many.sql
	sqlExtendMany string
	//go:embed sql/held_many.sql
	sqlHeldMany string
)

var _ driver.BatchExtender = (*Backend)(nil)

// ExtendMany implements driver.BatchExtender: one statement per connection
// for all of its locks in reqs (two when some were lost), so renewing
// thousands of leases costs a few round trips.
func (b *Backend) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	res := make([]driver.ExtendResult, len(reqs))
	if err := ctx.Err(); err != nil {
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	ctx, cancel := statementContext(ctx)
	defer cancel()
	byShard := make(map[*shard][]int)
	names := make([]string, len(reqs))
	for i, r := range reqs {
		names[i] = LockName(r.Key)
		s := b.shard(names[i])
		byShard[s] = append(byShard[s], i)
	}
	for s, idx := range byShard {
		s.mu.Lock()
		s.extendMany(ctx, reqs, names, idx, res)
		s.mu.Unlock()
	}
	return res
}

// extendMany extends reqs[idx] on s and writes their results.
func (s *shard) extendMany(ctx context.Context, reqs []driver.ExtendRequest, names []string, idx []int, res []driver.ExtendResult) {
	start := time.Now()
	var live []int // requests this session holds, not yet expired locally
	for _, i := range idx {
		h, ok := s.held[names[i]]
		switch {
		case !ok || h.owner != reqs[i].Owner:
		case !start.Before(h.deadline):
			s.drop(ctx, names[i])
		default:
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return
	}
	cases := strings.TrimSuffix(strings.Repeat("WHEN ? THEN ? ", len(live)), " ")
	pairs := strings.TrimSuffix(strings.Repeat("(?, ?), ", len(live)), ", ")
	args := make([]any, 0, 4*len(live))
	for _, i := range live {
		args = append(args, names[i], reqs[i].TTL.Microseconds())
	}
	pairArgs := make([]any, 0, 2*len(live))
	for _, i := range live {
		pairArgs = append(pairArgs, names[i], reqs[i].Owner)
	}
	args = append(args, pairArgs...)
	q := strings.NewReplacer("{{cases}}", cases, "{{pairs}}", pairs).Replace(stripComments(sqlExtendMany))
	r, err := s.conn.ExecContext(ctx, q, args...)
	var n int64
	if err == nil {
		n, err = r.RowsAffected()
	}
	if err != nil {
		err = s.fail(err)
		for _, i := range live {
			res[i].Err = err
		}
		return
	}
	ok := make(map[[2]string]bool, len(live))
	if n == int64(len(live)) {
		for _, i := range live {
			ok[[2]string{names[i], reqs[i].Owner}] = true
		}
	} else if err := s.heldMany(ctx, pairs, pairArgs, ok); err != nil {
		for _, i := range live {
			res[i].Err = err
		}
		return
	}
	for _, i := range live {
		if ok[[2]string{names[i], reqs[i].Owner}] {
			res[i].OK = true
			h := s.held[names[i]]
			h.deadline = start.Add(reqs[i].TTL)
			s.held[names[i]] = h
		} else {
			s.drop(ctx, names[i])
		}
	}
}

// heldMany marks in ok the pairs that hold a live lease.
func (s *shard) heldMany(ctx context.Context, pairs string, args []any, ok map[[2]string]bool) error {
	rows, err := s.conn.QueryContext(ctx, strings.ReplaceAll(stripComments(sqlHeldMany), "{{pairs}}", pairs), args...)
	if err != nil {
		return s.fail(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, owner string
		if err := rows.Scan(&name, &owner); err != nil {
			return err
		}
		ok[[2]string{name, owner}] = true
	}
	return rows.Err()
}

// stripComments drops the "--" comment lines of a statement template, so
// that the placeholders they mention are not filled in there.
func stripComments(q string) string {
	var b strings.Builder
	for line := range strings.Lines(q) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
		}
	}
	return b.String()
}
