package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/driver"
)

// Backend keeps locks in Redis. It is safe for concurrent use. The zero
// value is not usable; call New, NewGoRedis or Dial.
type Backend struct {
	conn      conn
	cfg       config
	watchers  *watchers // subscriptions of Released, shared per client
	closeOnce sync.Once
	ttls      atomic.Pointer[ttlStrings] // the last TTL's script arguments
	clock     serverClock                // where grants' tokens start
}

var (
	_ driver.Backend        = (*Backend)(nil)
	_ driver.BatchExtender  = (*Backend)(nil)
	_ driver.Namer          = (*Backend)(nil)
	_ driver.Fencer         = (*Backend)(nil)
	_ driver.NoticeReleaser = (*Backend)(nil)
	_ driver.TokenRoom      = (*Backend)(nil)
)

// New returns a Backend over an existing rueidis client. The caller keeps
// owning client; Close on the Backend leaves it open.
func New(client rueidis.Client, opts ...Option) (*Backend, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", turnstile.ErrInvalidOption)
	}
	return newBackend(&rueidisConn{c: client}, opts)
}

// Dial connects to Redis with a rueidis client of its own, which Close
// closes. Connecting gives up after opt.Dialer.Timeout (rueidis's default:
// 5 s) or when ctx's deadline passes, whichever comes first. opt is used
// as given: clients opened from a URL also set opt.MaxFlushDelay to
// DefaultFlushDelay, which many concurrent callers want too.
func Dial(ctx context.Context, opt rueidis.ClientOption, opts ...Option) (*Backend, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", turnstile.ErrInvalidOption)
	}
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err // before dialling: bad options cost no connection
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		if opt.Dialer.Timeout == 0 {
			opt.Dialer.Timeout = rueidis.DefaultDialTimeout
		}
		opt.Dialer.Timeout = max(min(opt.Dialer.Timeout, time.Until(dl)), time.Millisecond)
		if opt.Sentinel.MasterSet != "" && (opt.Sentinel.Dialer.Timeout == 0 || opt.Sentinel.Dialer.Timeout > opt.Dialer.Timeout) {
			opt.Sentinel.Dialer.Timeout = opt.Dialer.Timeout
		}
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		if client != nil { // ForceSingleClient returns a client even when dialling failed
			client.Close()
		}
		return nil, connectError(opt, err)
	}
	c := &rueidisConn{c: client, owns: true}
	if err := checkWait(c, cfg); err != nil {
		client.Close()
		return nil, err
	}
	b := &Backend{conn: c, cfg: cfg, watchers: watchersFor(c)}
	b.clock.off = c.failsOver()
	return b, nil
}

// connectError says why connecting to opt.InitAddress failed, naming the
// address(es) tried: a database the server does not have is a mistake in
// the options (turnstile.ErrInvalidURL), not an outage, and a server that
// answers with something other than RESP is not Redis at all.
func connectError(opt rueidis.ClientOption, err error) error {
	addr := strings.Join(opt.InitAddress, ",")
	if addr == "" {
		addr = "(no address)"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "DB index is out of range"):
		return fmt.Errorf("%w: redis at %s has no database %d (%s): the server's \"databases\" setting bounds the database number",
			turnstile.ErrInvalidURL, addr, opt.SelectDB, msg)
	case opt.Sentinel.MasterSet != "" && opt.Sentinel.Password != "" &&
		(strings.HasPrefix(msg, "WRONGPASS") || strings.Contains(msg, "without any password configured")):
		return fmt.Errorf("redis: connect to the sentinels %s of %q: %w (the URL's credentials log in to the Sentinels too: Sentinels without that user or password take sentinel_auth=none)", addr, opt.Sentinel.MasterSet, err)
	case strings.HasPrefix(msg, "received unknown message type") || strings.HasPrefix(msg, "received unexpected"):
		return fmt.Errorf("redis: %s does not speak the Redis protocol (%s): is the address another kind of server?", addr, msg)
	}
	return fmt.Errorf("redis: connect to %s: %w", addr, err)
}

func newBackend(c conn, opts []Option) (*Backend, error) {
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		return nil, err
	}
	if err := checkWait(c, cfg); err != nil {
		return nil, err
	}
	b := &Backend{conn: c, cfg: cfg, watchers: watchersFor(c)}
	b.clock.off = c.failsOver()
	return b, nil
}

// Name implements driver.Namer: "redis" and the server address(es).
func (b *Backend) Name() string { return "redis " + b.conn.addr() }

// HoldsTTL implements driver.TTLHolder: the lock key's PX is the TTL of
// its last Acquire or Extend, so turnstile.WithLockDelay costs no extra
// command. The lock kinds' views (Fair, Semaphore, ReadLock, WriteLock,
// Reentrant) do not offer it.
func (b *Backend) HoldsTTL() bool { return true }

// Close ends the subscriptions of Released and closes the Redis client if
// the Backend created it (Dial, or turnstile.Open).
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.watchers.release()
		b.conn.close()
	})
	return nil
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, bool, error) {
	return b.AcquireAt(ctx, key, owner, ttl, 0)
}

// AcquireAt is Acquire with the grant's fencing token starting from
// clock (µs since the epoch) instead of the Backend's own reading of the
// server clock (ClockReading); 0 means that reading. The token is the
// greater of clock and the key's last token + 1. A Redlock gives all its
// nodes one reading, so that a new key gets one token everywhere and none
// needs raising (redlock package).
func (b *Backend) AcquireAt(ctx context.Context, key, owner string, ttl time.Duration, clock uint64) (uint64, bool, error) {
	if err := check(ctx, key); err != nil {
		return 0, false, err
	}
	if clock >= 1<<53 {
		return 0, false, fmt.Errorf("%w: token clock %d is not below 2^53", turnstile.ErrInvalidOption, clock)
	}
	own := b.clock.now(ctx, b.conn) // sampled again when stale, also when unused
	if err := ctx.Err(); err != nil {
		return 0, false, err // ended while sampling: nothing was sent
	}
	sctx, stop := settling(ctx)
	c := b.acquireCall(key, owner, ttl, clock, own)
	var tok int64
	var err error
	if b.waits() {
		tok, err = b.grant(sctx, sources[acquireScript], plainSHA[acquireScript], c, func(ctx context.Context) { _, _ = b.Release(ctx, key, owner) })
	} else {
		tok, err = b.conn.eval(sctx, acquireScript, c)
	}
	stop()
	return b.acquired(ctx, tok, err)
}

// acquireCall is the acquire script's call: the token starts from clock,
// or, when clock is 0, from own, the Backend's reading of the server
// clock (0 when it has none: the script reads TIME), with the margin for
// a fresh key.
func (b *Backend) acquireCall(key, owner string, ttl time.Duration, clock uint64, own int64) call {
	margin := "0"
	if clock == 0 {
		clock = uint64(max(own, 0))
		margin = freshMargin
	}
	c := b.lockCall(key, owner, ttl, 3)
	c.args = append(c.args, strconv.FormatUint(clock, 10), margin)
	if b.cfg.quarantine > 0 {
		c.keys = append(c.keys, b.marker(c.keys[0]))
		c.args = append(c.args, millis(b.cfg.quarantine))
	}
	return c
}

// acquired reads the acquire script's reply tok (or err) to a call
// made for ctx.
func (b *Backend) acquired(ctx context.Context, tok int64, err error) (uint64, bool, error) {
	if err == nil && ctx.Err() != nil {
		// The caller gave up while the script ran: it has its outcome, an
		// error, and releases what the script may have taken; that
		// release now reaches the server after the script.
		err = ctx.Err()
	}
	if err != nil {
		return 0, false, err
	}
	if tok < 0 {
		if b.cfg.quarantine > 0 {
			return 0, false, &QuarantineError{Server: b.Name(), Left: time.Duration(-tok) * time.Millisecond}
		}
		return 0, false, fmt.Errorf("redis: acquire script returned %d", tok)
	}
	return uint64(tok), tok > 0, nil
}

// Extend implements driver.Backend.
func (b *Backend) Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if err := check(ctx, key); err != nil {
		return false, err
	}
	n, err := b.conn.eval(ctx, extendScript, b.lockCall(key, owner, ttl, 0))
	return n == 1, err
}

// ExtendMany implements driver.BatchExtender: every renewal goes to Redis
// in one pipelined batch.
func (b *Backend) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	res := make([]driver.ExtendResult, len(reqs))
	if len(reqs) == 0 {
		return res
	}
	if err := ctx.Err(); err != nil {
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	calls := make([]call, 0, len(reqs))
	index := make([]int, 0, len(reqs)) // calls[j] is reqs[index[j]]
	for i, r := range reqs {
		if r.Key == "" {
			res[i].Err = errEmptyKey
			continue
		}
		calls = append(calls, b.lockCall(r.Key, r.Owner, r.TTL, 0))
		index = append(index, i)
	}
	for j, rep := range b.conn.evalMulti(ctx, extendScript, calls) {
		res[index[j]] = driver.ExtendResult{OK: rep.err == nil && rep.n == 1, Err: rep.err}
	}
	return res
}

// lockCall is the call of the acquire and extend scripts: both set the
// lock's TTL and the fence's, which outlives it by the grace period.
// room is how many more arguments the caller appends.
func (b *Backend) lockCall(key, owner string, ttl time.Duration, room int) call {
	n := b.names(key)
	lockTTL, fenceTTL := b.ttlArgs(ttl)
	return call{
		keys: []string{n.lock, n.fence},
		args: append(make([]string, 0, 3+room), owner, lockTTL, fenceTTL),
	}
}

// ClockReading is the Backend's reading of its server's clock, in µs
// since the epoch, where the fencing tokens of its grants start; 0 before
// it has one. It does not ask the server: the reading is sampled with
// TIME at most every 10 s by the grants themselves.
func (b *Backend) ClockReading() uint64 { return uint64(max(b.clock.reading(), 0)) }

// Release implements driver.Backend. The release notice goes out only
// when someone failed to take the lock while it was held.
func (b *Backend) Release(ctx context.Context, key, owner string) (bool, error) {
	ok, _, err := b.release(ctx, key, owner, "")
	return ok, err
}

// ReleaseNotice implements driver.NoticeReleaser: Release with the notice
// sent as n says — only if someone failed to take the lock meanwhile, or
// in any case — and whether someone had (the lock was marked).
func (b *Backend) ReleaseNotice(ctx context.Context, key, owner string, n driver.Notice) (ok, tried bool, err error) {
	return b.release(ctx, key, owner, noticeArg(n))
}

// release runs the release script; notice is its ARGV[3] (release.lua).
// tried reports that the lock was marked: someone failed to take it.
func (b *Backend) release(ctx context.Context, key, owner, notice string) (ok, tried bool, err error) {
	if err := check(ctx, key); err != nil {
		return false, false, err
	}
	r, err := b.conn.eval(ctx, releaseScript, b.releaseCall(key, owner, notice))
	return r >= 1, r == 2, err
}

// releaseCall is the release script's call; notice is its ARGV[3].
func (b *Backend) releaseCall(key, owner, notice string) call {
	n := b.names(key)
	return call{
		keys: []string{n.lock, n.fence},
		args: []string{owner, n.channel, notice},
	}
}

// noticeArg is the release script's ARGV[3] for n.
func noticeArg(n driver.Notice) string {
	if n == driver.NoticeAlways {
		return "always"
	}
	return ""
}

// tokenRoom is the room between two grants' fencing tokens: every token
// is a multiple of it (token.lua's ROOM).
const tokenRoom = 16

// TokenRoom implements driver.TokenRoom: every fencing token this backend
// issues, for every lock kind, is a multiple of 16, and the next one for
// the key is at least 16 greater. A Client hands a lock within itself with
// the token plus one, up to 15 times, without a round trip.
func (b *Backend) TokenRoom() uint64 { return tokenRoom }

var errEmptyKey = fmt.Errorf("%w: empty key", turnstile.ErrInvalidKey)

// check refuses what would otherwise reach Redis as a malformed script
// call. The Client validates keys already; a Backend may be used directly.
func check(ctx context.Context, key string) error {
	if key == "" {
		return errEmptyKey
	}
	return ctx.Err()
}

// millis renders d in whole milliseconds, rounded up: a lock must not
// expire in Redis before the holder's own deadline.
func millis(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatInt(int64(max(ms, 1)), 10)
}
