package redis

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/turnstilelock/turnstile/internal/clusterslot"
	"github.com/turnstilelock/turnstile/internal/rediskeys"
)

// ErrQuarantined means the server refused a lock because its process
// started less than the restart quarantine ago (WithRestartQuarantine):
// it may have lost locks that are still held. It is not an answer about
// the key: the outcome is "this server cannot vote yet".
var ErrQuarantined = errors.New("redis: server in restart quarantine")

// QuarantineError is returned by Acquire while the server is in its
// restart quarantine. It matches ErrQuarantined.
type QuarantineError struct {
	Server string        // the backend's Name
	Left   time.Duration // until the server grants locks again
}

func (e *QuarantineError) Error() string {
	return fmt.Sprintf("%s: server started less than the restart quarantine ago; it grants locks again in %v", e.Server, e.Left)
}

func (e *QuarantineError) Unwrap() error { return ErrQuarantined }

// RestartQuarantine returns the restart quarantine (WithRestartQuarantine);
// 0 means off. A Redlock made of such backends refuses TTLs longer than
// the shortest quarantine of its members.
func (b *Backend) RestartQuarantine() time.Duration { return b.cfg.quarantine }

// The start marker.
//
// The acquire script needs to know when the server process started, and
// must touch only keys of the lock's Redis Cluster slot. So the marker is
// kept per slot: P{tag}:started, where tag is a short string that hashes
// to the lock's slot. Each marker holds the process start time, read from
// INFO the first time the marker is missing; a restart without persistence
// drops them all with the locks. That costs at most one small key per slot
// in use (16,384 at most) and one INFO per slot per restart.

// marker returns the start marker of the slot of the lock key lock.
func (b *Backend) marker(lock string) string {
	return rediskeys.Key(b.cfg.prefix, slotTags()[clusterslot.Of(lock)], rediskeys.Started)
}

// slotTags maps every slot to the first base-36 number that hashes to it
// (at most 4 characters). Built once, on the first acquisition with a
// quarantine, in a few milliseconds; the table takes about 300 KiB.
var slotTags = sync.OnceValue(func() *[clusterslot.Count]string {
	var tags [clusterslot.Count]string
	for n, left := uint64(0), clusterslot.Count; left > 0; n++ {
		tag := strconv.FormatUint(n, 36)
		if s := clusterslot.CRC16(tag) % clusterslot.Count; tags[s] == "" {
			tags[s] = tag
			left--
		}
	}
	return &tags
})
