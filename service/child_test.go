package service_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	v1 "github.com/turnstilelock/turnstile/service/gen/turnstile/v1"
)

// envHoldChild makes the test binary a Hold client: addr and key.
const envHoldChild = "TURNSTILE_SERVICE_TEST_HOLD"

// runHoldChild holds a lock through a Hold stream, says HELD with its
// token, and waits to be killed.
func runHoldChild() {
	v := os.Getenv(envHoldChild)
	if v == "" {
		return
	}
	addr, key, _ := strings.Cut(v, " ")
	c := clientsOf(nopTB{}, addr)
	s, err := c.locks.Hold(context.Background(), connect.NewRequest(&v1.HoldRequest{Key: key, Ttl: durationpb.New(time.Minute)}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for s.Receive() {
		if g := s.Msg().GetGranted(); g != nil {
			fmt.Printf("HELD %d\n", g.Lease.Token)
		}
	}
	fmt.Fprintln(os.Stderr, "the stream ended:", s.Err())
	os.Exit(1)
}

// nopTB is enough of a testing.TB for the helpers a child process uses.
type nopTB struct{ testing.TB }

func (nopTB) Cleanup(func()) {}
func (nopTB) Helper()        {}
