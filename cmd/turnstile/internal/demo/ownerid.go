//go:build unix

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
)

// A shared owner id: five instances used "Thread-42".
const (
	ownerProcs  = 5
	ownerRounds = 4
	ownerName   = "Thread-42"
	ownerTTL    = 200 * time.Millisecond // turnstile.MinTTL
)

// ownerWork is how long each round holds the lock; rounds longer than
// ownerTTL outlive their lock, as jobs do that run late.
var ownerWork = []time.Duration{70 * time.Millisecond, 300 * time.Millisecond, 120 * time.Millisecond, 360 * time.Millisecond}

// ownerParams is what each of the five processes needs to know.
type ownerParams struct {
	Variant string `json:"variant"`
	Run     string `json:"run"`
}

// ownerTally is what one process's rounds came to.
type ownerTally struct {
	Owner          string `json:"owner"`           // its first owner id
	ReleasedOthers int64  `json:"released_others"` // releases that removed another process's lock
	Refused        int64  `json:"refused"`         // releases refused: the lock was no longer its own
	Example        string `json:"example,omitempty"`
}

func ownerLockKey(run string) string   { return "demo:owner:{" + run + "}:lock" }
func ownerHolderKey(run string) string { return "demo:owner:{" + run + "}:holder" }

// ownerIDWorker is one of the five processes.
func ownerIDWorker(ctx context.Context, env *environment, spec workerSpec, w *workerLink) (any, error) {
	var p ownerParams
	if err := json.Unmarshal(spec.Params, &p); err != nil {
		return nil, err
	}
	me := "process " + strconv.Itoa(spec.Index+1)
	var c *turnstile.Client
	if p.Variant == "turnstile" {
		var err error
		// The same instance id everywhere, like the incident's thread name:
		// the owner ids still differ.
		c, err = env.newClient(turnstile.WithInstanceID(ownerName), turnstile.WithTTL(ownerTTL), turnstile.WithoutWatchdog(),
			turnstile.WithBackoff(turnstile.Exponential{Base: time.Millisecond, Cap: 10 * time.Millisecond, MaxRetries: -1}))
		if err != nil {
			return nil, err
		}
		defer c.Close()
	}
	if err := w.ready(ctx); err != nil {
		return nil, err
	}
	rc := env.rc
	t := &ownerTally{}
	for round := range ownerRounds {
		work := ownerWork[(round+spec.Index)%len(ownerWork)]
		var lease *turnstile.Lease
		if c == nil {
			if err := naiveLock(ctx, rc, ownerLockKey(p.Run)); err != nil {
				return nil, err
			}
			if t.Owner == "" {
				t.Owner = ownerName
			}
		} else {
			var err error
			if lease, err = c.Acquire(ctx, "lock:owner:"+p.Run); err != nil {
				return nil, err
			}
			if t.Owner == "" {
				t.Owner = lease.Owner()
			}
		}
		if err := rc.Do(ctx, rc.B().Set().Key(ownerHolderKey(p.Run)).Value(me).Build()).Error(); err != nil {
			return nil, err
		}
		if err := sleepCtx(ctx, work); err != nil {
			return nil, err
		}
		holder, err := rc.Do(ctx, rc.B().Get().Key(ownerHolderKey(p.Run)).Build()).ToString()
		if err != nil {
			return nil, err
		}
		var released bool
		if c == nil {
			// The "safe" release of the incident: compare the owner id,
			// then DEL. Every process has the same id, so the check passes.
			released, err = naiveUnlock(ctx, rc, ownerLockKey(p.Run))
		} else {
			err = lease.Release(ctx)
			released = err == nil
			if errors.Is(err, turnstile.ErrNotHeld) {
				t.Refused++
				err = nil
			}
		}
		if err != nil {
			return nil, err
		}
		if released && holder != me {
			t.ReleasedOthers++
			if t.Example == "" {
				t.Example = fmt.Sprintf("%s released %s's lock", me, holder)
			}
		}
	}
	return t, nil
}

// naiveLock waits for SET key Thread-42 NX PX ttl to succeed.
func naiveLock(ctx context.Context, rc rueidis.Client, key string) error {
	for {
		err := rc.Do(ctx, rc.B().Set().Key(key).Value(ownerName).Nx().PxMilliseconds(ownerTTL.Milliseconds()).Build()).Error()
		if err == nil {
			return nil
		}
		if !errors.Is(err, rueidis.Nil) {
			return err
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return err
		}
	}
}

// naiveUnlock is GET, compare with the owner id, DEL.
func naiveUnlock(ctx context.Context, rc rueidis.Client, key string) (bool, error) {
	v, err := rc.Do(ctx, rc.B().Get().Key(key).Build()).ToString()
	if errors.Is(err, rueidis.Nil) || (err == nil && v != ownerName) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, rc.Do(ctx, rc.B().Del().Key(key).Build()).Error()
}

// runOwnerID runs the five processes with the shared owner id, then with
// turnstile's owner ids.
func runOwnerID(ctx context.Context, env *environment) ([]result, error) {
	var rs []result
	for _, v := range []string{"naive", "turnstile"} {
		p := ownerParams{Variant: v, Run: v + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
		raw, _ := json.Marshal(p)
		specs := make([]workerSpec, ownerProcs)
		for i := range specs {
			specs[i] = workerSpec{Scenario: "owner-id", Variant: v, Params: raw}
		}
		env.progress("owner-id %s: %d processes, %d rounds each, TTL %v, jobs of %v", v, ownerProcs, ownerRounds, ownerTTL, ownerWork)
		g, err := startWorkers(ctx, env, specs)
		if err != nil {
			return rs, fmt.Errorf("%s: %w", v, err)
		}
		g.goAll()
		tallies := make([]ownerTally, ownerProcs)
		ptrs := make([]any, ownerProcs)
		for i := range tallies {
			ptrs[i] = &tallies[i]
		}
		err = g.wait(ctx, ptrs...)
		g.Close()
		if err != nil {
			return rs, fmt.Errorf("%s: %w", v, err)
		}
		rs = append(rs, ownerResult(v, tallies))
	}
	return rs, nil
}

func ownerResult(variant string, tallies []ownerTally) result {
	var others, refused int64
	example := ""
	owners := make([]string, 0, len(tallies))
	for _, t := range tallies {
		others += t.ReleasedOthers
		refused += t.Refused
		owners = append(owners, t.Owner)
		if example == "" {
			example = t.Example
		}
	}
	r := result{Variant: variant, Naive: variant == "naive"}
	distinct := map[string]bool{}
	for _, o := range owners {
		distinct[o] = true
	}
	r.OK = others == 0 && (variant == "naive" || len(distinct) == len(owners))
	switch {
	case others > 0:
		r.Summary = fmt.Sprintf("%d releases removed another process's lock (%s): every process is %q", others, example, ownerName)
	case variant == "naive":
		r.Summary = fmt.Sprintf("no process happened to release another's lock, though all are %q", ownerName)
	default:
		r.Summary = fmt.Sprintf("same instance id, different owner ids (%s and %s, ...); %d releases of expired leases refused (ErrNotHeld), none removed another's lock",
			owners[0], owners[1], refused)
	}
	r.add("store", "redis")
	r.add("processes", len(tallies))
	r.add("owners", owners)
	r.add("distinct_owners", len(distinct))
	r.add("released_others_lock", others)
	r.add("refused_releases", refused)
	return r
}
