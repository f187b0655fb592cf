package redis

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
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
	return b.cfg.prefix + "{" + slotTags()[keySlot(lock)] + "}:started"
}

// keySlot is the Redis Cluster slot of a key: CRC16 of its hash tag (the
// text between the first '{' and the next '}', if not empty), or of the
// whole key, modulo 16384.
func keySlot(key string) uint16 {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return crc16(key) % numSlots
			}
		}
		break
	}
	return crc16(key) % numSlots
}

const numSlots = 16384

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slotTags maps every slot to the first base-36 number that hashes to it
// (at most 4 characters). Built once, on the first acquisition with a
// quarantine, in a few milliseconds; the table takes about 300 KiB.
var slotTags = sync.OnceValue(func() *[numSlots]string {
	var tags [numSlots]string
	for n, left := uint64(0), numSlots; left > 0; n++ {
		tag := strconv.FormatUint(n, 36)
		if s := crc16(tag) % numSlots; tags[s] == "" {
			tags[s] = tag
			left--
		}
	}
	return &tags
})
