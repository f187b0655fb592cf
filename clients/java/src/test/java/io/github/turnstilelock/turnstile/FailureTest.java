package io.github.turnstilelock.turnstile;

import java.io.BufferedReader;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * What the client does when things go wrong: a dead holder, a forced
 * release, a wrong token, an unreachable or draining service.
 */
final class FailureTest {
    private final Client c = Support.client();

    void testSigkilledHolderFreesTheLockWithinItsTtl() throws Exception {
        String key = Support.key("killed");
        Duration ttl = Duration.ofSeconds(5);
        Process w = Support.worker("hold", Support.url(), key, Long.toString(ttl.toMillis()));
        long held;
        try {
            BufferedReader r = Support.lines(w);
            held = Long.parseLong(Support.readLine(w, r, 60).split(" ")[1]);
            w.destroyForcibly(); // SIGKILL
            w.waitFor(10, TimeUnit.SECONDS);
        } finally {
            Support.end(w);
        }
        long started = System.nanoTime();
        try (Lease lease = c.acquire(key, ttl, ttl.multipliedBy(2))) {
            double took = (System.nanoTime() - started) / 1e9;
            Check.isTrue(lease.token() > held, "the next holder's token is greater");
            // Its kernel closed the connection: the service released the lock
            // at once rather than at the TTL.
            Check.less(took, ttl.toSeconds(), "seconds the next holder waited");
        }
    }

    void testForceReleaseIsToldWithinASecond() throws Exception {
        // A 10 s TTL: the lease's next renewal is 3.3 s away, so only the
        // service's word on the forced release can tell it within 1 s.
        String key = Support.key("forced");
        Lease lease = c.acquire(key, Duration.ofSeconds(10), Duration.ofSeconds(10));
        CountDownLatch told = new CountDownLatch(1);
        lease.onLost(e -> told.countDown());
        long started = System.nanoTime();
        LockState removed = c.forceRelease(key);
        Check.isTrue(removed.held(), "it was held");
        LeaseLostException why = lease.lost().get(5, TimeUnit.SECONDS);
        double took = (System.nanoTime() - started) / 1e9;
        Check.less(took, 1.0, "seconds from the forced release to lease.lost()");
        Check.isTrue(told.await(5, TimeUnit.SECONDS), "the onLost listener was called");
        Check.isTrue(!lease.held(), "not held");
        Check.equal("LOCK_LOST", why.reason(), "reason");
        Check.raises(LeaseLostException.class, lease::close);
        try (Lease next = c.tryAcquire(key, Duration.ofSeconds(5))) {
            Check.isTrue(next.token() > removed.token(), "the next token is above the fence floor");
        }
    }

    /** Removed through another instance, the lease is told only at its next renewal; close() asks the store. */
    void testReleaseFindsALossNotYetTold() throws Exception {
        try (Support.Instance extra = new Support.Instance()) {
            String key = Support.key("untold");
            Lease lease = c.acquire(key, Duration.ofSeconds(30), Duration.ofSeconds(10));
            Client admin = Client.builder(extra.url).token(Support.admin()).build();
            Check.isTrue(admin.forceRelease(key).held(), "it was held");
            Check.raises(LeaseLostException.class, lease::close);
            Check.isTrue(lease.lost().isDone(), "lost");
        }
    }

    void testLostInATryBlockThrowsAtItsEnd() {
        String key = Support.key("lostblock");
        Check.raises(LeaseLostException.class, () -> {
            try (Lease lease = c.acquire(key, Duration.ofMillis(1200), Duration.ofSeconds(10))) {
                c.forceRelease(key);
                lease.lost().get(5, TimeUnit.SECONDS);
            }
        });
    }

    void testWrongBearerToken() {
        String admin = Support.admin();
        String name = admin.substring(0, admin.indexOf('.'));
        String secret = Support.secretOf(admin);
        String wrong = name + "." + new StringBuilder(secret).reverse();
        Client bad = Client.builder(Support.url()).token(wrong).build();
        Check.excludes(bad.toString(), Support.secretOf(wrong), "toString");
        List<Check.Call> calls = List.of(
                () -> bad.acquire(Support.key("auth"), Duration.ofSeconds(5), Duration.ofSeconds(5)),
                () -> bad.tryAcquire("k", Duration.ofSeconds(5)),
                () -> bad.status("k"),
                () -> bad.election("e").campaign(null, null, Duration.ofSeconds(1)));
        for (Check.Call call : calls) {
            PermissionDeniedException e = Check.raises(PermissionDeniedException.class, call);
            Check.isTrue(e instanceof UnauthenticatedException, "unauthenticated: " + e);
            Check.equal("NO_TOKEN", e.reason(), "reason");
            Check.excludes(e.toString(), secret, "the error");
            Check.excludes(e.toString(), Support.secretOf(wrong), "the error");
        }
    }

    void testKeyOutsideTheTokensPrefixes() {
        String limited = Support.env("TURNSTILE_TEST_LIMITED");
        Client lc = Client.builder(Support.url()).token(limited).build();
        PermissionDeniedException e = Check.raises(PermissionDeniedException.class,
                () -> lc.acquire(Support.key("prefix"), Duration.ofSeconds(5), Duration.ofSeconds(5)));
        Check.equal("KEY_NOT_ALLOWED", e.reason(), "reason");
        Check.excludes(e.getMessage(), Support.secretOf(limited), "the error");
        e = Check.raises(PermissionDeniedException.class, () -> lc.forceRelease("other:x"));
        Check.equal("ROLE_NOT_ALLOWED", e.reason(), "reason");
        try (Lease lease = lc.acquire("other:" + Support.key("allowed"), Duration.ofSeconds(5), Duration.ofSeconds(5))) {
            Check.isTrue(lease.token() > 0, "a lease under its prefix");
        }
    }

    private static String deadAddress() throws Exception {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return "http://127.0.0.1:" + s.getLocalPort(); // nothing listens there once it is closed
        }
    }

    void testUnavailableWithinTheWait() throws Exception {
        Client dead = Client.builder(deadAddress()).token(Support.admin()).build();
        long started = System.nanoTime();
        UnavailableException e = Check.raises(UnavailableException.class,
                () -> dead.acquire(Support.key("down"), Duration.ofSeconds(5), Duration.ofMillis(1500)));
        double took = (System.nanoTime() - started) / 1e9;
        Check.less(took, 1.5 + 1.0, "seconds to give up");
        Check.isTrue(e.getMessage().contains("could not be reached"), e.getMessage());
        Check.equal(1, e.getMessage().split("127\\.0\\.0\\.1", -1).length - 1, "each address once: " + e.getMessage());
        Check.excludes(e.getMessage(), Support.secretOf(Support.admin()), "the error");
        Check.raises(UnavailableException.class, () -> dead.status("k"));
        Check.raises(UnavailableException.class, () -> dead.tryAcquire("k", Duration.ofSeconds(5)));
    }

    void testFailsOverToALiveInstance() throws Exception {
        Client two = Client.builder(deadAddress(), Support.url()).token(Support.admin()).build();
        try (Lease lease = two.acquire(Support.key("failover"), Duration.ofSeconds(5), Duration.ofSeconds(5))) {
            Check.isTrue(lease.token() > 0, "a lease");
        }
        Check.isTrue(two.info().store().startsWith("redis"), "info from the live instance");
    }

    /** A lease moves to another instance when its own drains or dies. */
    private void heldThroughExtra(boolean kill) throws Exception {
        try (Support.Instance extra = new Support.Instance()) {
            Client two = Client.builder(extra.url, Support.url()).token(Support.admin()).build();
            String key = Support.key("handover");
            try (Lease lease = two.acquire(key, Duration.ofSeconds(3), Duration.ofSeconds(10))) {
                long first = lease.token();
                extra.stop(kill);
                // Resumed on the other instance, with a new token, the lock
                // held all along.
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (lease.token() == first && System.nanoTime() < deadline && !lease.lost().isDone()) {
                    Thread.sleep(20);
                }
                Check.isTrue(!lease.lost().isDone(), "lost: " + (lease.lost().isDone() ? lease.lost().get().getMessage() : ""));
                Check.isTrue(lease.token() > first, "a new, greater token");
                Thread.sleep(3500); // past the TTL: renewed by the other instance
                Check.isTrue(lease.held(), "held");
                Check.equal(List.of(lease.token()), c.status(key).holders().stream().map(Holder::token).toList(), "holders");
            }
            Check.isTrue(!c.status(key).held(), "released");
        }
    }

    void testHandoverFromADrainedInstance() throws Exception {
        heldThroughExtra(false);
    }

    void testHandoverFromAKilledInstance() throws Exception {
        heldThroughExtra(true);
    }

    void testTls() {
        String url = Support.env("TURNSTILE_TEST_TLS_URL");
        Path ca = Path.of(Support.env("TURNSTILE_TEST_CA"));
        Client tls = Client.builder(url).token(Support.admin()).caFile(ca).build();
        try (Lease lease = tls.acquire(Support.key("tls"), Duration.ofSeconds(5), Duration.ofSeconds(5))) {
            Check.isTrue(lease.token() > 0, "a lease over TLS");
        }
        Client unverified = Client.builder(url).token(Support.admin()).build();
        UnavailableException e = Check.raises(UnavailableException.class, () -> unverified.status("k"));
        Check.isTrue(e.getMessage().contains("TLS"), e.getMessage());
        Check.excludes(e.getMessage(), Support.secretOf(Support.admin()), "the error");
        Check.raises(IllegalArgumentException.class, () -> Client.builder(Support.url()).caFile(ca).build());
    }
}
