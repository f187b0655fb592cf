package peers_test

import (
	"context"
	"errors"
	"testing"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/bench/workload"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSingleServerPeersRefuseSeveralAddresses(t *testing.T) {
	for _, lib := range peers.All() {
		addrs := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
		lk, err := lib.Open(context.Background(), addrs, 1)
		switch {
		case lib.MultiNode && err != nil:
			t.Errorf("%s over %d nodes: %v", lib.Name, len(addrs), err)
		case !lib.MultiNode && !errors.Is(err, workload.ErrUsage):
			t.Errorf("%s over %d nodes: %v, want ErrUsage", lib.Name, len(addrs), err)
		}
		if lk != nil {
			_ = lk.Close()
		}
		if _, err := lib.Open(context.Background(), nil, 1); !errors.Is(err, workload.ErrUsage) {
			t.Errorf("%s without an address: %v, want ErrUsage", lib.Name, err)
		}
	}
}
