package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/idempotency"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

func TestCrashedRunnerIsTakenOver(t *testing.T) {
	forEach(t, func(t *testing.T, k kind) {
		// The duplicate below must reach the store inside the claim's TTL
		// although the paused runner no longer renews it: 2 s allows for
		// a busy machine opening the duplicate's pool.
		const ttl = 2 * time.Second
		ctx := ctxFor(t, 20*time.Second)
		key := key(t, "job")
		// The first runner's renewals never reach the store: it looks
		// crashed to everyone else, but it is only paused, and comes back
		// with a result after its claim was taken over.
		paused := idempotency.Partitioned(k.open(t, idempotency.WithClaimTTL(ttl)))
		running, resume := make(chan struct{}), make(chan struct{})
		var cause error
		first := make(chan call, 1)
		go func() {
			r, rep, err := paused.Do(ctx, key, func(ctx context.Context) ([]byte, error) {
				close(running)
				<-ctx.Done() // told the claim is lost: no renewal confirmed for a TTL
				cause = context.Cause(ctx)
				<-resume
				return []byte("first"), nil
			})
			first <- call{r, rep, err}
		}()
		<-running
		if _, _, err := k.open(t).Do(ctx, key, func(context.Context) ([]byte, error) {
			return nil, errors.New("fn ran while the claim was live")
		}); !errors.Is(err, idempotency.ErrInProgress) {
			t.Errorf("duplicate during the claim got %v, want ErrInProgress", err)
		}
		// A patient duplicate takes the key over once the claim expired.
		r, rep, err := k.open(t, idempotency.WithClaimTTL(ttl), idempotency.WithWait(10*time.Second)).Do(ctx, key,
			func(context.Context) ([]byte, error) { return []byte("second"), nil })
		if err != nil || rep || string(r) != "second" {
			t.Fatalf("takeover = (%q, %v, %v), want (second, false, nil)", r, rep, err)
		}
		close(resume)
		c := <-first
		if !errors.Is(c.err, idempotency.ErrClaimLost) || string(c.result) != "first" || c.replayed {
			t.Errorf("paused runner got (%q, %v, %v), want (first, false, ErrClaimLost)", c.result, c.replayed, c.err)
		}
		if !errors.Is(cause, idempotency.ErrClaimLost) {
			t.Errorf("paused runner's fn context cause = %v, want ErrClaimLost", cause)
		}
		// The late result overwrote nothing.
		r, rep, err = k.open(t).Do(ctx, key, func(context.Context) ([]byte, error) { return []byte("third"), nil })
		if err != nil || !rep || string(r) != "second" {
			t.Errorf("later Do = (%q, %v, %v), want (second, true, nil)", r, rep, err)
		}
	})
}

// intruders claim a key behind a running call's back, as another runner
// would after the call's claim expired unnoticed.
var intruders = map[string]func(t *testing.T, key string) (check func()){
	"redis": func(t *testing.T, key string) func() {
		c := newRueidis(t)
		ctx := ctxFor(t, 10*time.Second)
		if err := c.Do(ctx, c.B().Set().Key(idempotency.RedisKeyPrefix+key).Value("cintruder").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		return func() {
			v, err := c.Do(ctx, c.B().Get().Key(idempotency.RedisKeyPrefix+key).Build()).ToString()
			if err != nil || v != "cintruder" {
				t.Errorf("the intruder's claim is now %q (%v), want it untouched", v, err)
			}
		}
	},
	"postgres": func(t *testing.T, key string) func() {
		pool := newPool(t)
		ctx := ctxFor(t, 10*time.Second)
		if _, err := pool.Exec(ctx, `UPDATE turnstile_idempotency SET claim_owner = 'intruder' WHERE key = $1`, key); err != nil {
			t.Fatal(err)
		}
		return func() {
			var state, owner string
			err := pool.QueryRow(ctx, `SELECT state, claim_owner FROM turnstile_idempotency WHERE key = $1`, key).Scan(&state, &owner)
			if err != nil || state != "running" || owner != "intruder" {
				t.Errorf("the intruder's claim is now (%s, %s, %v), want it untouched", state, owner, err)
			}
		}
	},
}

func TestRefusedRenewalCancelsFn(t *testing.T) {
	for _, k := range kinds() {
		intrude := intruders[k.name]
		if intrude == nil {
			continue // Memory's claims cannot be reached from outside
		}
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t, 20*time.Second)
			key := key(t, "job")
			var cause error
			r, rep, err := k.open(t, idempotency.WithClaimTTL(90*time.Millisecond)).Do(ctx, key, func(ctx context.Context) ([]byte, error) {
				check := intrude(t, key)
				t.Cleanup(check)
				<-ctx.Done() // the next renewal is refused
				cause = context.Cause(ctx)
				return []byte("late"), nil
			})
			if !errors.Is(err, idempotency.ErrClaimLost) || rep || string(r) != "late" {
				t.Errorf("Do = (%q, %v, %v), want (late, false, ErrClaimLost)", r, rep, err)
			}
			if !errors.Is(cause, idempotency.ErrClaimLost) {
				t.Errorf("fn context cause = %v, want ErrClaimLost", cause)
			}
		})
	}
}

// The child process of TestKilledRunnerIsTakenOver: it claims a key in a
// real store, says so on stdout, and runs until it is killed.
const (
	envChild = "IDEMPOTENCY_TEST_CHILD" // store kind
	envAddr  = "IDEMPOTENCY_TEST_ADDR"
	envKey   = "IDEMPOTENCY_TEST_KEY"
	childTTL = 500 * time.Millisecond
)

func runChild() {
	kind := os.Getenv(envChild)
	if kind == "" {
		return
	}
	if err := child(kind, os.Getenv(envAddr), os.Getenv(envKey)); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func child(kind, addr, key string) error {
	ctx := context.Background()
	var s idempotency.Store
	switch kind {
	case "redis":
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			return err
		}
		if s, err = idempotency.NewRedis(c, idempotency.WithClaimTTL(childTTL)); err != nil {
			return err
		}
	case "postgres":
		pool, err := pgxpool.New(ctx, addr)
		if err != nil {
			return err
		}
		if s, err = idempotency.NewPostgres(pool, idempotency.WithClaimTTL(childTTL)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown store %q", kind)
	}
	_, _, err := s.Do(ctx, key, func(ctx context.Context) ([]byte, error) {
		fmt.Println("running")
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	return err
}

func TestKilledRunnerIsTakenOver(t *testing.T) {
	addrs := map[string]string{"redis": redisSrv.Addr(), "postgres": pgSrv.URL()}
	for _, k := range kinds() {
		addr, ok := addrs[k.name]
		if !ok {
			continue // a Memory dies with its process
		}
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t, 30*time.Second)
			key := key(t, "job")
			out, kill := testserver.StartChild(t, envChild+"="+k.name, envAddr+"="+addr, envKey+"="+key)
			if line, err := out.ReadString('\n'); err != nil || line != "running\n" {
				t.Fatalf("child said %q (%v), want running", line, err)
			}
			var runs int
			fn := func(context.Context) ([]byte, error) { runs++; return []byte("second"), nil }
			// Several claim TTLs later the child's renewals still hold the key.
			time.Sleep(2 * childTTL)
			if _, _, err := k.open(t).Do(ctx, key, fn); !errors.Is(err, idempotency.ErrInProgress) {
				t.Fatalf("duplicate while the child runs got %v, want ErrInProgress", err)
			}
			_ = kill()
			r, rep, err := k.open(t, idempotency.WithWait(10*time.Second)).Do(ctx, key, fn)
			if err != nil || rep || string(r) != "second" || runs != 1 {
				t.Errorf("Do after the kill = (%q, %v, %v) with %d runs, want (second, false, nil), 1 run", r, rep, err, runs)
			}
		})
	}
}
