package redisproc

import "fmt"

// AppendFsync is a redis-server appendfsync policy: when the server
// fsyncs its append-only file.
type AppendFsync string

// The appendfsync policies of Redis.
const (
	// FsyncAlways fsyncs every write before the server replies to it: an
	// acknowledged write survives the process's crash and the machine's.
	FsyncAlways AppendFsync = "always"
	// FsyncEverySec fsyncs once a second, in the background (Redis's
	// default policy): a crash of the machine loses up to the last
	// second or two of writes. A crash of the process alone usually
	// loses none: the server writes each write to the file (the
	// operating system's cache) before it replies — but while a
	// background fsync is still running (a slow disk) it postpones that
	// write, for up to 2 s, and replies meanwhile.
	FsyncEverySec AppendFsync = "everysec"
	// FsyncNo leaves the fsyncs to the operating system.
	FsyncNo AppendFsync = "no"
)

// WithAppendOnly runs the server with an append-only file
// (--appendonly yes --appendfsync policy) in its directory (Redis 7 keeps
// it as a manifest and its parts in the subdirectory appendonlydir, the
// base part in RDB format as aof-use-rdb-preamble says by default). Kill
// then Restart starts the same server, on the same port and files, with
// the data set the file holds: keys with a TTL keep their absolute expiry
// time (Redis logs them with PXAT and PEXPIREAT), so a key whose time ran
// out while the server was down is expired when it comes back. StartWith
// refuses a policy other than FsyncAlways, FsyncEverySec and FsyncNo.
func WithAppendOnly(policy AppendFsync) Option {
	return func(s *Server) { s.appendfsync = policy }
}

// AppendOnly is the appendfsync policy of the server's append-only
// file, or "" when it runs without one.
func (s *Server) AppendOnly() AppendFsync { return s.appendfsync }

// checkAppendOnly refuses a policy redis-server does not know.
func (s *Server) checkAppendOnly() error {
	switch s.appendfsync {
	case "", FsyncAlways, FsyncEverySec, FsyncNo:
		return nil
	}
	return fmt.Errorf("start redis-server: appendfsync policy %q: want %q, %q or %q", s.appendfsync, FsyncAlways, FsyncEverySec, FsyncNo)
}

// persistence are the server's arguments for its append-only file:
// none (--appendonly no), or one fsynced as its policy says. RDB
// snapshots stay off either way (--save "").
func (s *Server) persistence() []string {
	if s.appendfsync == "" {
		return []string{"--appendonly", "no"}
	}
	return []string{"--appendonly", "yes", "--appendfsync", string(s.appendfsync)}
}
