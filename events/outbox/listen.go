package outbox

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed listen.sql
var listenSQL string

// listen signals wake each time rows are added to the outbox (the
// trigger Migrate creates sends a NOTIFY when the adding transaction
// commits), and once each time it starts listening, until ctx is done.
// It uses a connection of its own, beyond the pool. While it cannot
// listen, Run still polls.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	for {
		err := r.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		retry := max(r.poll, time.Second)
		r.log.Warn("turnstile/outbox: LISTEN failed; polling until it works again", "err", err, "retry_in", retry)
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (r *Relay) listenOnce(ctx context.Context, wake chan<- struct{}) error {
	conn, err := pgx.ConnectConfig(ctx, r.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = conn.Close(cctx)
		cancel()
	}()
	if _, err := conn.Exec(ctx, listenSQL); err != nil {
		return err
	}
	for {
		// Rows added before LISTEN took effect, or since the last notice.
		select {
		case wake <- struct{}{}:
		default: // a wake-up is pending already
		}
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
	}
}
