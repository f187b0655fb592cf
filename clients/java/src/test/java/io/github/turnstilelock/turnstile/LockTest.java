package io.github.turnstilelock.turnstile;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The client against a real turnstile serve over a real redis-server: mutual
 * exclusion, fencing tokens, kinds, status.
 */
final class LockTest {
    private final Client c = Support.client();

    /**
     * 4 processes x 200 sections under one lock: the count is exact and the
     * tokens strictly increase in the order of the sections.
     */
    void testFourProcessesCountExactly() throws Exception {
        int procs = 4;
        int n = 200;
        String key = Support.key("counter");
        Path dir = Files.createTempDirectory("turnstile-java-counter");
        try {
            Path counter = dir.resolve("counter");
            Files.writeString(counter, "");
            List<Process> ws = new ArrayList<>();
            long started = System.nanoTime();
            for (int i = 0; i < procs; i++) {
                ws.add(Support.worker("counter", Support.url(), key, counter.toString(), Integer.toString(n),
                        dir.resolve("log" + i).toString()));
            }
            try {
                for (Process w : ws) {
                    Check.isTrue(w.waitFor(300, TimeUnit.SECONDS), "a counter worker did not end");
                    Check.equal(0, w.exitValue(), "a counter worker's exit status");
                }
            } finally {
                for (Process w : ws) {
                    Support.end(w);
                }
            }
            double took = (System.nanoTime() - started) / 1e9;
            Check.equal(Integer.toString(procs * n), Files.readString(counter).strip(), "the count");
            List<long[]> sections = new ArrayList<>();
            for (int i = 0; i < procs; i++) {
                for (String line : Files.readAllLines(dir.resolve("log" + i))) {
                    String[] f = line.split(" ");
                    sections.add(new long[] {Long.parseLong(f[0]), Long.parseLong(f[1])});
                }
            }
            sections.sort((x, y) -> Long.compare(x[0], y[0]));
            Check.equal(procs * n, sections.size(), "sections logged");
            for (int i = 0; i < sections.size(); i++) {
                Check.equal((long) i, sections.get(i)[0], "section " + i + "'s value (a value read twice?)");
                if (i > 0) {
                    Check.isTrue(sections.get(i)[1] > sections.get(i - 1)[1],
                            "section " + i + "'s token is not above section " + (i - 1) + "'s");
                }
            }
            System.out.printf("  %d sections in %.1f s (%.1f ms each, JVM starts included)%n", procs * n, took, took * 1000 / (procs * n));
        } finally {
            try (var files = Files.list(dir)) {
                for (Path p : (Iterable<Path>) files::iterator) {
                    Files.delete(p);
                }
            }
            Files.delete(dir);
        }
    }

    void testLeaseBasics() {
        String key = Support.key("basics");
        Lease first;
        try (Lease lease = c.acquire(key, Duration.ofSeconds(10), Duration.ofSeconds(30))) {
            first = lease;
            Check.isTrue(lease.token() > 0, "a token");
            Check.isTrue(lease.held(), "held");
            Check.isTrue(!lease.lost().isDone(), "not lost");
            Check.isTrue(lease.validity().compareTo(Duration.ofSeconds(5)) > 0, "validity " + lease.validity());
            Check.equal(Duration.ofSeconds(10), lease.ttl(), "ttl");
            Check.equal(key, lease.key(), "key");
            LockState st = c.status(key);
            Check.isTrue(st.held(), "status says held");
            Check.equal(List.of(lease.token()), st.holders().stream().map(Holder::token).toList(), "holders' tokens");
            Check.equal(lease.owner(), st.holders().get(0).owner(), "owner");
            Check.isTrue(c.list(key).locks().stream().anyMatch(s -> s.key().equals(key)), "listed");
            Check.raises(NotAcquiredException.class, () -> c.tryAcquire(key, Duration.ofSeconds(5)));
            Check.raises(NotAcquiredException.class, () -> c.acquire(key, Duration.ofSeconds(5), Duration.ofMillis(300)));
        }
        Check.isTrue(!first.held(), "released");
        Check.isTrue(!first.lost().isDone(), "released, not lost");
        first.release(); // again: nothing
        // Released by handle: free when close() returned.
        try (Lease again = c.tryAcquire(key, Duration.ofSeconds(5))) {
            Check.isTrue(again.token() > first.token(), "the next token is greater");
        }
    }

    void testRenewedPastItsTtl() throws Exception {
        String key = Support.key("renewed");
        try (Lease lease = c.acquire(key, Duration.ofSeconds(1), Duration.ofSeconds(10))) {
            Thread.sleep(2500);
            Check.isTrue(lease.held(), "held past its TTL");
            Check.equal(List.of(lease.token()), c.status(key).holders().stream().map(Holder::token).toList(), "holders");
        }
    }

    void testTryAcquireRenewed() throws Exception {
        String key = Support.key("try");
        try (Lease lease = c.tryAcquire(key, Duration.ofSeconds(2))) {
            Thread.sleep(2500);
            Check.isTrue(lease.held(), "held past its TTL");
            Check.equal(List.of(lease.token()), c.status(key).holders().stream().map(Holder::token).toList(), "holders");
        }
        Check.isTrue(!c.status(key).held(), "released");
    }

    void testWaitForRelease() throws Exception {
        String key = Support.key("wait");
        Lease first = c.acquire(key, Duration.ofSeconds(10), Duration.ofSeconds(10));
        CompletableFuture<Long> second = CompletableFuture.supplyAsync(() -> {
            try (Lease l = c.acquire(key, Duration.ofSeconds(10), Duration.ofSeconds(30))) {
                return l.token();
            }
        });
        Thread.sleep(300);
        Check.isTrue(!second.isDone(), "the second took a held lock");
        first.close();
        Check.isTrue(second.get(30, TimeUnit.SECONDS) > first.token(), "the second's token is greater");
    }

    void testKinds() {
        List<Kind> kinds = c.info().kinds();
        Check.isTrue(kinds.contains(Kind.SHARED) && kinds.contains(Kind.SEMAPHORE), "the store's kinds: " + kinds);
        String key = Support.key("rw");
        try (Lease r1 = c.lock(key).kind(Kind.SHARED).ttl(Duration.ofSeconds(5)).acquire();
             Lease r2 = c.lock(key).kind(Kind.SHARED).ttl(Duration.ofSeconds(5)).tryAcquire()) {
            Check.equal(Kind.SHARED, r1.kind(), "kind");
            Check.isTrue(r2.held(), "two readers");
            Check.raises(NotAcquiredException.class, () -> c.lock(key).kind(Kind.EXCLUSIVE).ttl(Duration.ofSeconds(5)).tryAcquire());
        }
        try (Lease w = c.lock(key).kind(Kind.EXCLUSIVE).ttl(Duration.ofSeconds(5)).tryAcquire()) {
            Check.equal(Kind.EXCLUSIVE, w.kind(), "kind");
            Check.raises(NotAcquiredException.class, () -> c.lock(key).kind(Kind.SHARED).ttl(Duration.ofSeconds(5)).tryAcquire());
        }
        String sem = Support.key("sem");
        try (Lease a = c.lock(sem).semaphore(2).ttl(Duration.ofSeconds(5)).waitFor(Duration.ofSeconds(5)).acquire();
             Lease b = c.lock(sem).semaphore(2).ttl(Duration.ofSeconds(5)).waitFor(Duration.ofSeconds(5)).acquire()) {
            Check.isTrue(a.token() != b.token(), "two permits, two tokens");
            Check.equal(2, a.permits(), "permits");
            Check.raises(NotAcquiredException.class, () -> c.lock(sem).semaphore(2).ttl(Duration.ofSeconds(5)).tryAcquire());
            Check.equal(2, c.status(sem, Kind.SEMAPHORE, 2).holders().size(), "holders");
        }
    }

    void testRefusedByTheService() {
        InvalidArgumentException e = Check.raises(InvalidArgumentException.class,
                () -> c.lock("x".repeat(600)).ttl(Duration.ofSeconds(5)).tryAcquire());
        Check.equal("INVALID_KEY", e.reason(), "reason");
    }
}
