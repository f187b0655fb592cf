//go:build linux

package demo

import (
	"strings"
	"testing"

	"github.com/turnstilelock/turnstile/internal/testserver"
)

// TestDemoCouponAndJobs: on Redis and PostgreSQL, the naive coupon code
// issues coupons twice and the naive workers run jobs twice; claim's
// coupons issue each once, its SKIP LOCKED queue runs each job once, and
// a crashed worker's jobs are retaken and its late Completes refused.
func TestDemoCouponAndJobs(t *testing.T) {
	rs := testserver.StartRedis(t)
	pg := testserver.StartPostgres(t)
	r := runDemo(t, "coupon", "jobs", "--json", "--redis", rs.URL(), "--postgres", pg.URL())
	if r.code != 0 {
		t.Fatalf("exit code %d, want 0; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	runs := parseDemoJSON(t, r.stdout)
	checkTurnstileRuns(t, runs)
	if len(runs) != 6 {
		t.Errorf("%d runs, want 6:\n%s", len(runs), r.stdout)
	}
	// Eight redeemers in step, each with 1 ms between its read and its
	// write: the naive code hands out some coupons more than once.
	naive := find(t, runs, "coupon", "naive")
	if number(t, naive, "double_issued") == 0 || number(t, naive, "redemptions") <= couponCodes || naive["ok"] != false || naive["store"] != "postgres" {
		t.Errorf("naive coupons were not double-issued: %v", naive)
	}
	for _, v := range []string{"update-where-unused", "redis-script"} {
		run := find(t, runs, "coupon", v)
		if number(t, run, "redemptions") != couponCodes || number(t, run, "double_issued") != 0 ||
			number(t, run, "told_used") != couponCodes*(couponRedeemers-1) || number(t, run, "failed") != 0 {
			t.Errorf("coupon %s: %v", v, run)
		}
	}
	if naive := find(t, runs, "jobs", "naive"); number(t, naive, "ran_twice") == 0 || naive["ok"] != false {
		t.Errorf("naive workers never ran a job twice: %v", naive)
	}
	if sl := find(t, runs, "jobs", "skip-locked"); number(t, sl, "runs") != jobsCount || number(t, sl, "ran_twice") != 0 || number(t, sl, "never_ran") != 0 {
		t.Errorf("SKIP LOCKED workers: %v", sl)
	}
	crash := find(t, runs, "jobs", "crashed-worker")
	if number(t, crash, "retaken") != jobsCrashCount/2 || number(t, crash, "late_completes_refused") != jobsCrashCount/2 || number(t, crash, "runs") != jobsCrashCount {
		t.Errorf("crashed worker: %v", crash)
	}
	if !strings.Contains(crash["summary"].(string), "attempt 1 < 2") {
		t.Errorf("the crashed worker's summary does not show the attempts: %s", crash["summary"])
	}
}

// TestDemoCouponAndJobsInProcess: with no servers, the coupon race runs on
// the in-process Redis and jobs is skipped, and the table says so. (The
// JSON lines of a skipped variant are simply absent: TestDemoCouponAndJobs
// checks their form.)
func TestDemoCouponAndJobsInProcess(t *testing.T) {
	r := runDemo(t, "--in-process", "coupon", "jobs")
	if r.code != 0 {
		t.Fatalf("exit code %d, want 0; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"jobs: skipped: FOR UPDATE SKIP LOCKED needs PostgreSQL",
		"coupon: update-where-unused needs PostgreSQL, which this run has not: skipped",
		"naive: double-issued", "redis-script", "every coupon issued exactly once",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table has no %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "skip-locked") {
		t.Errorf("jobs ran without PostgreSQL:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "jobs: skipped") || !strings.Contains(r.stderr, "redis: in-process (miniredis)") {
		t.Errorf("stderr does not say jobs was skipped on the in-process Redis:\n%s", r.stderr)
	}
}
