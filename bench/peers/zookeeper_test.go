package peers_test

import (
	"testing"

	"github.com/turnstilelock/turnstile/bench/peers"
	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestZooKeeperLock: go-zookeeper's zk.Lock, a connection per worker,
// excludes its workers from one key, refuses two servers and closes its
// connections.
func TestZooKeeperLock(t *testing.T) {
	checkRecipe(t, peers.ZooKeeperLock(), testserver.StartZooKeeper(t).Addr())
}
