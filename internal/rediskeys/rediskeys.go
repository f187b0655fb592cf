// Package rediskeys names the Redis keys of turnstile's locks and of
// package fence's guards, once for both. The redis backend, the forced
// unlock that raises a guard, and the guard itself must agree on every
// name, and a data key written through a guard must never take a name a
// lock uses: that needs one list of those names, and this is it.
//
// Every key is P{K}S: the key prefix P (the redis backend's WithPrefix,
// free of braces), the lock key or resource K as a Redis Cluster hash tag
// (Tag), and a Suffix S. Only the Suffix values declared here exist, so a
// lock kind that names a key of its own declares its suffix here, which
// reserves it (Taken).
package rediskeys

import "strings"

// Suffix is what follows the hash tag in the name of a key a lock or a
// guard keeps, or of a lock's release channel.
type Suffix struct{ s string }

// String returns the suffix itself (":fence").
func (s Suffix) String() string { return s.s }

// reserved are all the Suffix values, in the order declared.
var reserved []Suffix

func reserve(s string) Suffix {
	x := Suffix{s}
	reserved = append(reserved, x)
	return x
}

// The suffixes of every lock kind and of the guard.
var (
	Lock     = reserve("")          // the plain (and fair) lock: its holder
	Fence    = reserve(":fence")    // the last fencing token issued
	Released = reserve(":released") // the release notices' channel
	Guard    = reserve(":guard")    // package fence: the last token a write carried
	Started  = reserve(":started")  // restart quarantine: when the server started (K a slot's tag)

	Reentrant        = reserve(":reentrant")         // a reentrant lock's holder and count
	Readers          = reserve(":readers")           // a read-write lock's readers
	Writer           = reserve(":writer")            // its writer
	Writers          = reserve(":writers")           // writers waiting
	Semaphore        = reserve(":semaphore")         // a semaphore's permits
	SemaphorePermits = reserve(":semaphore:permits") // their number
	Queue            = reserve(":queue")             // a fair lock's queue
	QueueAlive       = reserve(":queue:alive")       // its waiters' heartbeats
	QueueSeq         = reserve(":queue:seq")         // its arrival counter
)

// Reserved returns every Suffix a lock or guard uses.
func Reserved() []Suffix { return append([]Suffix(nil), reserved...) }

// Escape is what goes before key inside its hash tag: a '\' for a key
// that begins with '}' — which would close the tag at once, and Redis
// takes an empty tag for none — or with '\' itself, so that the mapping
// stays one-to-one; nothing for any other key.
func Escape(key string) string {
	if key != "" && (key[0] == '}' || key[0] == '\\') {
		return `\`
	}
	return ""
}

// Tag is key as a Redis Cluster hash tag: "{" + Escape(key) + key + "}".
func Tag(key string) string { return "{" + Escape(key) + key + "}" }

// Key is the name P{K}S of the key (or channel) s of lock key or resource
// key under prefix.
func Key(prefix, key string, s Suffix) string { return prefix + Tag(key) + s.s }

// Taken reports whether name is the name of a key a lock or a guard
// keeps — P{K}S for some prefix P, key K and Suffix S — or of a release
// channel. Writing such a key as data would break a lock or a guard,
// under whatever prefix and for whatever key: it counts whatever P and K
// are, so a name that is another resource's key counts too.
func Taken(name string) bool {
	for _, s := range reserved {
		if rest, ok := strings.CutSuffix(name, s.s); ok && isTagged(rest) {
			return true
		}
	}
	return false
}

// isTagged reports whether name is P + Tag(K) for some prefix P without
// braces and some non-empty K.
func isTagged(name string) bool {
	i := strings.IndexByte(name, '{')
	if i < 0 || strings.IndexByte(name[:i], '}') >= 0 || !strings.HasSuffix(name, "}") {
		return false
	}
	inner := name[i+1 : len(name)-1]
	if inner == "" {
		return false
	}
	switch inner[0] {
	case '}':
		return false // Tag escapes such a key
	case '\\':
		return len(inner) > 1 && (inner[1] == '}' || inner[1] == '\\')
	}
	return true
}
