package claim_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/turnstilelock/turnstile/claim"
)

// payloads returns n payloads "0", "1", ...
func payloads(n int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = []byte(strconv.Itoa(i))
	}
	return ps
}

// Six workers, each over connections of its own, claim batches of 5 of
// 240 jobs (120 with pauses) until none is left, and complete each. With pauses, every
// fifth job's worker stops for longer than the lease before completing:
// other workers take such jobs again, and the paused worker's Complete is
// refused unless nobody had. Either way every job is completed by exactly
// one claim, the last.
func TestJobsCompletedExactlyOnce(t *testing.T) {
	const workers = 6
	for _, st := range jobStores {
		for _, pauses := range []bool{false, true} {
			name := st.name
			lease, jobs := 30*time.Second, 240
			if pauses {
				name += "/Pauses"
				lease, jobs = 60*time.Millisecond, 120
			}
			t.Run(name, func(t *testing.T) {
				ctx := ctxFor(t, 90*time.Second)
				queue := unique("once-" + name)
				ids, err := st.connect(t, queue).Enqueue(ctx, payloads(jobs)...)
				if err != nil || len(ids) != jobs {
					t.Fatalf("Enqueue = %d ids, %v", len(ids), err)
				}
				var (
					mu        sync.Mutex
					completed = map[int64][]claim.Job{} // job → claims whose Complete succeeded
					refused   int
					failed    []error
					wg        sync.WaitGroup
				)
				for w := range workers {
					q := st.connect(t, queue, claim.WithLease(lease))
					worker := fmt.Sprintf("worker-%d", w)
					wg.Go(func() {
						idle := 0
						for n := 0; ; n++ {
							got, err := q.Claim(ctx, worker, 5)
							if err != nil {
								mu.Lock()
								failed = append(failed, err)
								mu.Unlock()
								return
							}
							if len(got) == 0 {
								// Paused claims may come due again: look
								// a few more times before stopping. (Every
								// job is completed either way: a claim is
								// refused only when a later one took the
								// job, and that one completes it.)
								if idle++; idle > 5 || !pauses {
									return
								}
								time.Sleep(20 * time.Millisecond)
								continue
							}
							idle = 0
							for i, j := range got {
								if j.Worker != worker || j.Attempt < 1 || j.Status != claim.StatusClaimed || string(j.Payload) != strconv.FormatInt(j.ID-ids[0], 10) {
									mu.Lock()
									failed = append(failed, fmt.Errorf("claimed %+v", j))
									mu.Unlock()
									return
								}
								if pauses && (n+i)%5 == 0 {
									time.Sleep(2 * lease)
								}
								err := q.Complete(ctx, j)
								mu.Lock()
								switch {
								case err == nil:
									completed[j.ID] = append(completed[j.ID], j)
								case errors.Is(err, claim.ErrClaimLost):
									refused++
								default:
									failed = append(failed, err)
								}
								mu.Unlock()
							}
						}
					})
				}
				wg.Wait()
				if len(failed) > 0 {
					t.Fatalf("%d failures, first: %v", len(failed), failed[0])
				}
				check := st.connect(t, queue)
				for _, id := range ids {
					c := completed[id]
					if len(c) != 1 {
						t.Fatalf("job %d completed by %d claims: %+v", id, len(c), c)
					}
					j, err := check.Lookup(ctx, id)
					if err != nil || j.Status != claim.StatusDone || j.Attempt != c[0].Attempt || j.Worker != c[0].Worker || !j.Due.IsZero() {
						t.Fatalf("Lookup(%d) = %+v, %v; want done by %s attempt %d", id, j, err, c[0].Worker, c[0].Attempt)
					}
					if !pauses && j.Attempt != 1 {
						t.Fatalf("job %d took %d attempts without pauses", id, j.Attempt)
					}
				}
				t.Logf("late completions refused: %d", refused)
			})
		}
	}
}

// A worker that stops heartbeating loses its jobs when the lease passes:
// another worker's Claim takes them as attempt 2, and the first worker's
// late Complete, Release and Heartbeat are refused, saying who holds them.
func TestJobsCrashedWorker(t *testing.T) {
	const lease = 300 * time.Millisecond
	for _, st := range jobStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := ctxFor(t, 30*time.Second)
			queue := unique("crash-" + st.name)
			a := st.connect(t, queue, claim.WithLease(lease))
			b := st.connect(t, queue, claim.WithLease(lease))
			if _, err := a.Enqueue(ctx, payloads(3)...); err != nil {
				t.Fatal(err)
			}
			claimedAt := time.Now()
			held, err := a.Claim(ctx, "a", 10)
			if err != nil || len(held) != 3 {
				t.Fatalf("Claim by a = %d jobs, %v; want 3", len(held), err)
			}
			for _, j := range held {
				if j.Attempt != 1 || j.Due.IsZero() {
					t.Fatalf("a's claim %+v: want attempt 1 and a lease", j)
				}
			}
			// a crashes. Until its lease passes, b finds nothing (a machine
			// too busy to ask within the lease may find them all).
			got, err := b.Claim(ctx, "b", 10)
			if err != nil || len(got) != 0 && time.Since(claimedAt) < lease {
				t.Fatalf("Claim by b during a's lease = %+v, %v; want none", got, err)
			}
			taken := got
			deadline := time.Now().Add(20 * time.Second)
			for len(taken) < 3 {
				if time.Now().After(deadline) {
					t.Fatalf("b took %d of a's jobs within 20 s", len(taken))
				}
				time.Sleep(50 * time.Millisecond)
				got, err := b.Claim(ctx, "b", 10)
				if err != nil {
					t.Fatal(err)
				}
				taken = append(taken, got...)
			}
			for i, j := range taken {
				if j.ID != held[i].ID || j.Attempt != 2 || j.Worker != "b" {
					t.Fatalf("b took %+v; want job %d attempt 2", j, held[i].ID)
				}
			}
			// a wakes up and reports its work: refused.
			for _, j := range held {
				err := a.Complete(ctx, j)
				var lost *claim.LostError
				if !errors.As(err, &lost) || !errors.Is(err, claim.ErrClaimLost) {
					t.Fatalf("a's late Complete of job %d = %v; want a LostError", j.ID, err)
				}
				if lost.ID != j.ID || lost.Attempt != 1 || lost.NowAttempt != 2 || lost.NowWorker != "b" || lost.Status != claim.StatusClaimed {
					t.Fatalf("a's late Complete: %+v", lost)
				}
				if err := a.Release(ctx, j, 0); !errors.Is(err, claim.ErrClaimLost) {
					t.Fatalf("a's late Release of job %d = %v; want ErrClaimLost", j.ID, err)
				}
			}
			if ids, err := a.Heartbeat(ctx, "a"); err != nil || len(ids) != 0 {
				t.Fatalf("a's Heartbeat = %v, %v; want no claims", ids, err)
			}
			// b completes; a retry of that Complete succeeds too, a's is
			// still refused and now says the job is done.
			for _, j := range taken {
				if err := b.Complete(ctx, j); err != nil {
					t.Fatalf("b's Complete: %v", err)
				}
				if err := b.Complete(ctx, j); err != nil {
					t.Fatalf("b's Complete again: %v", err)
				}
			}
			err = a.Complete(ctx, held[0])
			var lost *claim.LostError
			if !errors.As(err, &lost) || lost.Status != claim.StatusDone || lost.NowAttempt != 2 {
				t.Fatalf("a's Complete of a done job = %v", err)
			}
			for _, j := range held {
				now, err := b.Lookup(ctx, j.ID)
				if err != nil || now.Status != claim.StatusDone || now.Attempt != 2 || now.Worker != "b" {
					t.Fatalf("Lookup(%d) = %+v, %v", j.ID, now, err)
				}
			}
		})
	}
}

// Heartbeat moves a worker's leases forward and keeps its jobs from other
// workers; Release gives a job back, at once or after a delay, and the
// next claim counts the attempt on.
func TestJobsHeartbeatAndRelease(t *testing.T) {
	for _, st := range jobStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := ctxFor(t, 30*time.Second)
			queue := unique("hb-" + st.name)
			a := st.connect(t, queue, claim.WithLease(time.Minute))
			b := st.connect(t, queue, claim.WithLease(time.Minute))
			ids, err := a.Enqueue(ctx, []byte("x"), nil)
			if err != nil || len(ids) != 2 || ids[1] <= ids[0] {
				t.Fatalf("Enqueue = %v, %v", ids, err)
			}
			if j, err := a.Lookup(ctx, ids[1]); err != nil || len(j.Payload) != 0 || j.Status != claim.StatusReady || j.Attempt != 0 || j.Worker != "" {
				t.Fatalf("Lookup of a new job = %+v, %v", j, err)
			}
			held, err := a.Claim(ctx, "a", 1)
			if err != nil || len(held) != 1 || held[0].ID != ids[0] {
				t.Fatalf("Claim(1) = %+v, %v; want the first job", held, err)
			}
			more, err := a.Claim(ctx, "a", 5)
			if err != nil || len(more) != 1 || more[0].ID != ids[1] {
				t.Fatalf("Claim(5) = %+v, %v; want the second job", more, err)
			}
			held = append(held, more...)
			time.Sleep(5 * time.Millisecond)
			beat, err := a.Heartbeat(ctx, "a")
			if err != nil || len(beat) != 2 || beat[0] != ids[0] || beat[1] != ids[1] {
				t.Fatalf("Heartbeat = %v, %v; want %v", beat, err, ids)
			}
			for _, j := range held {
				now, err := a.Lookup(ctx, j.ID)
				if err != nil || !now.Due.After(j.Due) || now.Worker != "a" || now.Status != claim.StatusClaimed {
					t.Fatalf("after Heartbeat: %+v, %v; want a lease past %v", now, err, j.Due)
				}
			}
			if got, err := b.Claim(ctx, "b", 5); err != nil || len(got) != 0 {
				t.Fatalf("b claimed %+v, %v while a holds both", got, err)
			}
			if beat, err := b.Heartbeat(ctx, "b"); err != nil || len(beat) != 0 {
				t.Fatalf("b's Heartbeat = %v, %v; want none", beat, err)
			}

			// Released at once: b takes it as attempt 2.
			if err := a.Release(ctx, held[0], 0); err != nil {
				t.Fatal(err)
			}
			if err := a.Release(ctx, held[0], 0); err != nil {
				t.Fatalf("Release again (a retry): %v", err)
			}
			got, err := b.Claim(ctx, "b", 5)
			if err != nil || len(got) != 1 || got[0].ID != ids[0] || got[0].Attempt != 2 {
				t.Fatalf("b's Claim after a Release = %+v, %v; want job %d attempt 2", got, err, ids[0])
			}
			if err := a.Complete(ctx, held[0]); !errors.Is(err, claim.ErrClaimLost) {
				t.Fatalf("Complete of a released and retaken job = %v; want ErrClaimLost", err)
			}
			// Released for an hour: nobody can take it meanwhile.
			if err := a.Release(ctx, held[1], time.Hour); err != nil {
				t.Fatal(err)
			}
			if got, err := b.Claim(ctx, "b", 5); err != nil || len(got) != 0 {
				t.Fatalf("b claimed %+v, %v; the job is not due for an hour", got, err)
			}
			if j, err := b.Lookup(ctx, held[1].ID); err != nil || j.Status != claim.StatusReady || j.Attempt != 1 ||
				j.Due.Before(time.Now().Add(50*time.Minute)) {
				t.Fatalf("Lookup of a job released for an hour = %+v, %v", j, err)
			}
			if _, err := b.Lookup(ctx, 1<<50); !errors.Is(err, claim.ErrUnknownJob) {
				t.Fatalf("Lookup of a missing job = %v; want ErrUnknownJob", err)
			}
			ghost := claim.Job{ID: 1 << 50, Attempt: 1}
			if err := b.Complete(ctx, ghost); !errors.Is(err, claim.ErrUnknownJob) {
				t.Fatalf("Complete of a missing job = %v; want ErrUnknownJob", err)
			}
			// Another queue's job is not this queue's.
			other := st.connect(t, queue+"-other")
			if _, err := other.Lookup(ctx, ids[0]); !errors.Is(err, claim.ErrUnknownJob) {
				t.Fatalf("Lookup in another queue = %v; want ErrUnknownJob", err)
			}
		})
	}
}
