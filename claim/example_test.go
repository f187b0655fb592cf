package claim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"github.com/turnstilelock/turnstile/claim"
	"github.com/turnstilelock/turnstile/internal/redisproc"
)

// Two shoppers race for one coupon: one gets it, the other is told who
// did; the winner's retry after a timeout succeeds again.
func Example() {
	// A private redis-server for the example; use your own address.
	dir, err := os.MkdirTemp("", "claim-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	srv, err := redisproc.Start(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Kill()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	ctx := context.Background()

	coupons, err := claim.NewRedisCoupons(client, "coupons:spring")
	if err != nil {
		fmt.Println(err)
		return
	}
	n, err := coupons.Issue(ctx, "SPRING-0001", "SPRING-0002")
	fmt.Println("issued:", n, err)

	for _, shopper := range []string{"alice", "bob", "alice"} {
		r, err := coupons.Redeem(ctx, "SPRING-0001", shopper)
		var used *claim.UsedError
		switch {
		case errors.As(err, &used):
			fmt.Printf("%s: already used by %s\n", shopper, used.By)
		case err != nil:
			fmt.Printf("%s: %v\n", shopper, err)
		case r.Again:
			fmt.Printf("%s: still yours\n", shopper)
		default:
			fmt.Printf("%s: redeemed\n", shopper)
		}
	}
	_, err = coupons.Redeem(ctx, "WINTER-0001", "carol")
	fmt.Println("carol:", errors.Is(err, claim.ErrUnknownCode))
	// Output:
	// issued: 2 <nil>
	// alice: redeemed
	// bob: already used by alice
	// alice: still yours
	// carol: true
}

// A worker stalls past its lease; another worker takes its job and
// completes it, and the stalled worker's late Complete is refused.
func ExamplePostgresJobs() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleDatabaseURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	if err := claim.Migrate(ctx, pool); err != nil {
		fmt.Println(err)
		return
	}
	jobs, err := claim.NewPostgresJobs(pool, "example:thumbnails", claim.WithLease(200*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := jobs.Enqueue(ctx, []byte("photo-1.jpg")); err != nil {
		fmt.Println(err)
		return
	}
	mine, err := jobs.Claim(ctx, "worker-a", 10)
	if err != nil || len(mine) != 1 {
		fmt.Println(mine, err)
		return
	}
	fmt.Printf("worker-a: %s, attempt %d\n", mine[0].Payload, mine[0].Attempt)

	// worker-a stalls and sends no heartbeat; its lease passes.
	time.Sleep(300 * time.Millisecond)
	theirs, err := jobs.Claim(ctx, "worker-b", 10)
	if err != nil || len(theirs) != 1 {
		fmt.Println(theirs, err)
		return
	}
	fmt.Printf("worker-b: %s, attempt %d\n", theirs[0].Payload, theirs[0].Attempt)
	fmt.Println("worker-b completes:", jobs.Complete(ctx, theirs[0]))
	err = jobs.Complete(ctx, mine[0])
	fmt.Println("worker-a completes late:", errors.Is(err, claim.ErrClaimLost))
	// Output:
	// worker-a: photo-1.jpg, attempt 1
	// worker-b: photo-1.jpg, attempt 2
	// worker-b completes: <nil>
	// worker-a completes late: true
}
