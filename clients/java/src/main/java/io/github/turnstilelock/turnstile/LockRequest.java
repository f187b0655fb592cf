package io.github.turnstilelock.turnstile;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A lock to take, with its options: {@link Client#lock(String)} makes one.
 *
 * <pre>{@code
 * try (Lease lease = client.lock("report:daily").kind(Kind.SHARED).ttl(Duration.ofSeconds(30)).acquire()) { ... }
 * try (Lease lease = client.lock("gpu").semaphore(4).tryAcquire()) { ... }
 * }</pre>
 */
public final class LockRequest {
    private final Client client;
    private final String key;
    private Kind kind = Kind.LOCK;
    private int permits;
    private Duration ttl;
    private Duration wait;

    LockRequest(Client client, String key) {
        this.client = client;
        this.key = Wire.checkKey(key, "key");
    }

    /**
     * The kind of lock (default {@link Kind#LOCK}); for a semaphore, use
     * {@link #semaphore(int)}.
     *
     * @param kind the kind
     * @return this request
     */
    public LockRequest kind(Kind kind) {
        if (kind == null) {
            throw new NullPointerException("kind");
        }
        if (kind == Kind.SEMAPHORE && permits == 0) {
            throw new IllegalArgumentException("turnstile: a semaphore needs its permits: use semaphore(permits)");
        }
        this.kind = kind;
        if (kind != Kind.SEMAPHORE) {
            permits = 0;
        }
        return this;
    }

    /**
     * One of the permits of the key's semaphore.
     *
     * @param permits how many holders the semaphore admits, 1 to 65536
     * @return this request
     */
    public LockRequest semaphore(int permits) {
        if (permits < 1 || permits > 1 << 16) {
            throw new IllegalArgumentException("turnstile: a semaphore needs permits from 1 to 65536, got " + permits);
        }
        this.kind = Kind.SEMAPHORE;
        this.permits = permits;
        return this;
    }

    /**
     * How long the store keeps the lock if this client vanishes (default: the
     * service's --ttl). The service renews it while it is held.
     *
     * @param ttl 200 ms to 24 h
     * @return this request
     */
    public LockRequest ttl(Duration ttl) {
        this.ttl = Wire.checkTtl(ttl);
        return this;
    }

    /**
     * How long {@link #acquire()} waits (default: the service's --max-wait).
     *
     * @param wait the wait; zero makes one attempt
     * @return this request
     */
    public LockRequest waitFor(Duration wait) {
        this.wait = Wire.checkWait(wait);
        return this;
    }

    /**
     * Waits for the lock and holds it, renewed by the service until the
     * lease is released. Instances that cannot be reached are tried again
     * within the wait.
     *
     * @return the lease
     * @throws NotAcquiredException if the wait ended first
     * @throws UnavailableException if no instance answered within the wait
     * @throws PermissionDeniedException if the token may not take the key
     * @throws UnsupportedException if the store has no such kind
     */
    public Lease acquire() {
        if (wait != null && wait.isZero()) {
            return tryAcquire();
        }
        Map<String, Object> body = body();
        if (wait != null) {
            body.put("wait", Wire.duration(wait));
        }
        return client.held(Held.open(client.transport(), "Locks", "Hold", body, wait, wait != null, -1, null), ttl);
    }

    /**
     * Takes the lock if it is free, and holds it as {@link #acquire()} does.
     *
     * @return the lease
     * @throws NotAcquiredException if another owner holds it
     */
    public Lease tryAcquire() {
        Map<String, Object> body = body();
        body.put("owner", Owner.newId());
        Transport t = client.transport();
        Map<String, Object> got;
        try {
            got = t.unary("Locks", "TryAcquire", body, null);
        } catch (UnavailableException e) {
            if (!e.getMessage().contains("outcome is unknown")) {
                throw e;
            }
            // The same owner id again: the store grants a lock it holds
            // already to its owner, so the retry is safe.
            got = t.unary("Locks", "TryAcquire", body, null);
        }
        Map<String, Object> handle = Wire.obj(got, "lease");
        if (handle == null) {
            throw new TurnstileException("the service granted a lease without its handle", "internal", "");
        }
        Map<String, Object> hold = new LinkedHashMap<>();
        hold.put("resume", handle);
        if (ttl != null) {
            hold.put("ttl", Wire.duration(ttl));
        }
        Held.Grant g;
        try {
            g = Held.open(t, "Locks", "Hold", hold, null, false, -1, null);
        } catch (RuntimeException e) {
            try {
                t.unary("Locks", "Release", Map.of("lease", handle), null);
            } catch (TurnstileException ignored) {
                // It expires within its TTL.
            }
            throw e;
        }
        return client.held(g, ttl);
    }

    private Map<String, Object> body() {
        Map<String, Object> b = new LinkedHashMap<>();
        b.put("key", key);
        b.put("kind", kind.wire());
        if (permits != 0) {
            b.put("permits", permits);
        }
        if (ttl != null) {
            b.put("ttl", Wire.duration(ttl));
        }
        return b;
    }
}
