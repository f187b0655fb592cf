package claim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/claim"
)

var longName = strings.Repeat("n", claim.MaxNameLen+1)

func TestConstructorsRefuseBadInput(t *testing.T) {
	pool := pgPool(t, 1)
	db := mysqlDB(t, 1)
	rc := redisClient(t)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"PostgresCoupons/Nil", second(claim.NewPostgresCoupons(nil)), turnstile.ErrInvalidOption},
		{"MySQLCoupons/Nil", second(claim.NewMySQLCoupons(nil)), turnstile.ErrInvalidOption},
		{"RedisCoupons/Nil", second(claim.NewRedisCoupons(nil, "p")), turnstile.ErrInvalidOption},
		{"RedisCoupons/EmptyPrefix", second(claim.NewRedisCoupons(rc, "")), turnstile.ErrInvalidKey},
		{"RedisCoupons/LongPrefix", second(claim.NewRedisCoupons(rc, longName)), turnstile.ErrInvalidKey},
		{"PostgresJobs/Nil", second(claim.NewPostgresJobs(nil, "q")), turnstile.ErrInvalidOption},
		{"PostgresJobs/EmptyQueue", second(claim.NewPostgresJobs(pool, "")), turnstile.ErrInvalidKey},
		{"PostgresJobs/LongQueue", second(claim.NewPostgresJobs(pool, longName)), turnstile.ErrInvalidKey},
		{"PostgresJobs/NilOption", second(claim.NewPostgresJobs(pool, "q", nil)), turnstile.ErrInvalidOption},
		{"PostgresJobs/ZeroLease", second(claim.NewPostgresJobs(pool, "q", claim.WithLease(0))), turnstile.ErrInvalidOption},
		{"PostgresJobs/NegativeLease", second(claim.NewPostgresJobs(pool, "q", claim.WithLease(-time.Second))), turnstile.ErrInvalidOption},
		{"PostgresJobs/TinyLease", second(claim.NewPostgresJobs(pool, "q", claim.WithLease(time.Microsecond))), turnstile.ErrInvalidOption},
		{"PostgresJobs/HugeLease", second(claim.NewPostgresJobs(pool, "q", claim.WithLease(claim.MaxLease+1))), turnstile.ErrInvalidOption},
		{"MySQLJobs/Nil", second(claim.NewMySQLJobs(nil, "q")), turnstile.ErrInvalidOption},
		{"MySQLJobs/EmptyQueue", second(claim.NewMySQLJobs(db, "")), turnstile.ErrInvalidKey},
		{"MySQLJobs/NegativeLease", second(claim.NewMySQLJobs(db, "q", claim.WithLease(-1))), turnstile.ErrInvalidOption},
		{"Migrate/Nil", claim.Migrate(context.Background(), nil), turnstile.ErrInvalidOption},
		{"MigrateMySQL/Nil", claim.MigrateMySQL(context.Background(), nil), turnstile.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("err = %v; want %v", tc.err, tc.want)
			}
		})
	}
	for name, err := range map[string]error{
		"min lease": second(claim.NewPostgresJobs(pool, "q", claim.WithLease(claim.MinLease))),
		"max lease": second(claim.NewMySQLJobs(db, "q", claim.WithLease(claim.MaxLease))),
		"max queue": second(claim.NewPostgresJobs(pool, longName[1:])),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Bad codes, names, counts and durations are refused before any round
// trip, with errors that say what was wrong; nothing changes.
func TestMethodsRefuseBadInput(t *testing.T) {
	ctx := ctxFor(t, 20*time.Second)
	for _, st := range couponStores {
		t.Run(st.name+"/Coupons", func(t *testing.T) {
			c := st.connect(t, "bad")
			if _, err := c.Issue(ctx, "bad-1"); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name string
				err  error
				want error
			}{
				{"Issue/None", second(c.Issue(ctx)), claim.ErrInvalidArgument},
				{"Issue/EmptyCode", second(c.Issue(ctx, "bad-2", "")), turnstile.ErrInvalidKey},
				{"Issue/LongCode", second(c.Issue(ctx, longName)), turnstile.ErrInvalidKey},
				{"Redeem/EmptyCode", second(c.Redeem(ctx, "", "alice")), turnstile.ErrInvalidKey},
				{"Redeem/LongCode", second(c.Redeem(ctx, longName, "alice")), turnstile.ErrInvalidKey},
				{"Redeem/EmptyRedeemer", second(c.Redeem(ctx, "bad-1", "")), turnstile.ErrInvalidKey},
				{"Redeem/LongRedeemer", second(c.Redeem(ctx, "bad-1", longName)), turnstile.ErrInvalidKey},
				{"Lookup/EmptyCode", second(c.Lookup(ctx, "")), turnstile.ErrInvalidKey},
			} {
				if !errors.Is(tc.err, tc.want) {
					t.Errorf("%s: err = %v; want %v", tc.name, tc.err, tc.want)
				}
			}
			if _, err := c.Issue(ctx, "bad-2", ""); !strings.Contains(err.Error(), "code 2 of 2: ") || !strings.Contains(err.Error(), "empty coupon code") {
				t.Errorf("Issue with an empty second code: %v; want it named", err)
			}
			if _, err := c.Lookup(ctx, "bad-2"); !errors.Is(err, claim.ErrUnknownCode) {
				t.Errorf("a refused batch issued a code: %v", err)
			}
			if cp, err := c.Lookup(ctx, "bad-1"); err != nil || cp.Used {
				t.Errorf("Lookup after refused calls = %+v, %v; want unused", cp, err)
			}
		})
	}
	for _, st := range jobStores {
		t.Run(st.name+"/Jobs", func(t *testing.T) {
			q := st.connect(t, unique("bad-"+st.name))
			ids, err := q.Enqueue(ctx, []byte("x"))
			if err != nil {
				t.Fatal(err)
			}
			good := claim.Job{ID: ids[0], Attempt: 1}
			for _, tc := range []struct {
				name string
				err  error
				want error
			}{
				{"Enqueue/None", second(q.Enqueue(ctx)), claim.ErrInvalidArgument},
				{"Claim/Zero", second(q.Claim(ctx, "w", 0)), claim.ErrInvalidArgument},
				{"Claim/Negative", second(q.Claim(ctx, "w", -3)), claim.ErrInvalidArgument},
				{"Claim/TooMany", second(q.Claim(ctx, "w", claim.MaxClaim+1)), claim.ErrInvalidArgument},
				{"Claim/EmptyWorker", second(q.Claim(ctx, "", 1)), turnstile.ErrInvalidKey},
				{"Claim/LongWorker", second(q.Claim(ctx, longName, 1)), turnstile.ErrInvalidKey},
				{"Heartbeat/EmptyWorker", second(q.Heartbeat(ctx, "")), turnstile.ErrInvalidKey},
				{"Complete/ZeroJob", q.Complete(ctx, claim.Job{}), claim.ErrInvalidArgument},
				{"Complete/NoAttempt", q.Complete(ctx, claim.Job{ID: ids[0]}), claim.ErrInvalidArgument},
				{"Complete/OtherQueue", q.Complete(ctx, claim.Job{ID: ids[0], Attempt: 1, Queue: "elsewhere"}), claim.ErrInvalidArgument},
				{"Release/NegativeDelay", q.Release(ctx, good, -time.Second), claim.ErrInvalidArgument},
				{"Release/HugeDelay", q.Release(ctx, good, claim.MaxDelay+1), claim.ErrInvalidArgument},
				{"Release/ZeroJob", q.Release(ctx, claim.Job{}, 0), claim.ErrInvalidArgument},
				{"Complete/Unclaimed", q.Complete(ctx, good), claim.ErrClaimLost},
			} {
				if !errors.Is(tc.err, tc.want) {
					t.Errorf("%s: err = %v; want %v", tc.name, tc.err, tc.want)
				}
			}
			if err := q.Release(ctx, good, -time.Second); !strings.Contains(err.Error(), "delay -1s is outside") {
				t.Errorf("Release with a negative delay: %v; want the delay named", err)
			}
			if j, err := q.Lookup(ctx, ids[0]); err != nil || j.Status != claim.StatusReady || j.Attempt != 0 {
				t.Errorf("Lookup after refused calls = %+v, %v; want ready, never claimed", j, err)
			}
		})
	}
}

func second[T any](_ T, err error) error { return err }
