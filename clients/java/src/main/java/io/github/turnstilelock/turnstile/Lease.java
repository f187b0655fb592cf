package io.github.turnstilelock.turnstile;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * A held lock: renewed by the service for as long as it is held, and told
 * the moment it is lost.
 *
 * <pre>{@code
 * try (Lease lease = client.acquire("lock:order:42", Duration.ofSeconds(10))) {
 *     db.write(row, lease.token());   // storage refuses tokens below the last it saw
 * }
 * }</pre>
 *
 * <p>{@link #token()} is the fencing token to pass to the storage you write
 * to. {@link #lost()} is a future completed the moment the lease is lost (a
 * renewal refused, the lock removed by force, or no renewal confirmed within
 * its validity), and {@link #onLost} adds a listener called then.
 * {@link #close()} releases the lock, and throws {@link LeaseLostException}
 * if the lease was lost meanwhile, so that work which may have overlapped
 * with the next holder's does not pass unnoticed (in try-with-resources,
 * an exception of the block comes first and this one is suppressed).
 *
 * <p>A lease the service hands over between instances (one that drains, or
 * a connection that broke) is resumed on another instance within its
 * validity, with a new, greater token: read {@link #token()} when you
 * write. A lease is safe to use from several threads.
 */
public class Lease implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("turnstile");

    // A lease is held until it is released or lost, once.
    private enum State { HELD, RELEASED, LOST }

    private final Transport t;
    private final Duration ttlAsked;
    private final String key;
    private final Kind kind;
    private final int permits;
    private final CompletableFuture<LeaseLostException> lost = new CompletableFuture<>();
    private final List<Consumer<? super LeaseLostException>> listeners = new ArrayList<>();
    private final String releaseService;
    private final String releaseMethod;

    // Guarded by this.
    private State state = State.HELD;
    private FrameStream stream;
    private Map<String, Object> handle;
    private long token;
    private Duration ttl;
    private long deadline; // System.nanoTime() when the validity ends
    private LeaseLostException error;

    Lease(Transport t, Held.Grant g, Duration ttlAsked, String releaseService, String releaseMethod) {
        this.t = t;
        this.ttlAsked = ttlAsked;
        this.releaseService = releaseService;
        this.releaseMethod = releaseMethod;
        this.stream = g.stream;
        Map<String, Object> h = Wire.obj(g.grant, "lease");
        this.key = h == null ? "" : Wire.str(h, "key");
        this.kind = h == null ? Kind.LOCK : Kind.ofWire(Wire.str(h, "kind"));
        this.permits = h == null ? 0 : Wire.int32(h, "permits");
        apply(g.grant);
    }

    /** Starts the lease's thread, once the lease is made. */
    final void start() {
        Thread th = new Thread(this::watch, "turnstile-lease " + key);
        th.setDaemon(true);
        th.start();
    }

    private synchronized void apply(Map<String, Object> grant) {
        Map<String, Object> h = Wire.obj(grant, "lease");
        if (h == null || Wire.str(h, "owner").isEmpty()) {
            throw new TurnstileException("the service granted a lease without its handle", "internal", "");
        }
        handle = h;
        token = Wire.uint(h, "token");
        ttl = Wire.durationOf(grant, "ttl");
        deadline = System.nanoTime() + Wire.durationOf(grant, "validity").toNanos();
    }

    /**
     * The fencing token: greater than every earlier token of the key. Pass it
     * to the storage you write to.
     *
     * @return the token (unsigned: compare with Long.compareUnsigned if it may pass 2^63)
     */
    public synchronized long token() {
        return token;
    }

    /**
     * The lock's key.
     *
     * @return the key
     */
    public String key() {
        return key;
    }

    /**
     * The kind of lock.
     *
     * @return the kind
     */
    public Kind kind() {
        return kind;
    }

    /**
     * A semaphore's number of permits (0 for the other kinds).
     *
     * @return the permits
     */
    public int permits() {
        return permits;
    }

    /**
     * The owner id the lock is held under in the store.
     *
     * @return the owner id
     */
    public synchronized String owner() {
        return Wire.str(handle, "owner");
    }

    /**
     * The lease's TTL: how long the store keeps the lock if no renewal comes.
     *
     * @return the TTL
     */
    public synchronized Duration ttl() {
        return ttl;
    }

    /**
     * How long the lease is certainly still held (zero once it ended).
     *
     * @return the time left
     */
    public synchronized Duration validity() {
        if (state != State.HELD) {
            return Duration.ZERO;
        }
        return Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
    }

    /**
     * Whether the lease is still held: neither released nor lost.
     *
     * @return true while held
     */
    public synchronized boolean held() {
        return state == State.HELD;
    }

    /**
     * A future completed, with the reason, the moment the lease is lost. It is
     * never completed if the lease is released first. Completing or cancelling
     * the returned future does not affect the lease.
     *
     * @return a copy of the lease's lost future
     */
    public CompletableFuture<LeaseLostException> lost() {
        return lost.copy();
    }

    /**
     * Calls listener the moment the lease is lost (at once if it was). It runs
     * on the lease's own thread: keep it short.
     *
     * @param listener called with the reason
     */
    public void onLost(Consumer<? super LeaseLostException> listener) {
        if (listener == null) {
            throw new NullPointerException("listener");
        }
        LeaseLostException e;
        synchronized (this) {
            if (state != State.LOST) {
                listeners.add(listener);
                return;
            }
            e = error;
        }
        listener.accept(e);
    }

    /**
     * Throws {@link LeaseLostException} if the lease was lost.
     *
     * @throws LeaseLostException if it was lost
     */
    public void check() {
        LeaseLostException e;
        synchronized (this) {
            e = error;
        }
        if (e != null) {
            throw e;
        }
    }

    /**
     * Releases the lock; when it returns, the lock is free. Releasing again
     * does nothing. If no instance answers, closing the lease's stream
     * releases it (or the lock expires within its TTL).
     *
     * @throws LeaseLostException if the lease had been lost, even if the
     *     service had not said so yet (the store no longer held it)
     */
    public void release() {
        boolean held;
        FrameStream st;
        Map<String, Object> h;
        synchronized (this) {
            held = state == State.HELD;
            if (held) {
                state = State.RELEASED;
            }
            st = stream;
            h = handle;
        }
        if (held) {
            try {
                t.unary(releaseService, releaseMethod, Map.of("lease", h), null);
            } catch (LeaseLostException e) {
                lose(e.getMessage(), State.RELEASED);
            } catch (TurnstileException e) {
                // Closing the stream below releases it, or it expires.
            }
        }
        st.close();
        check();
    }

    /**
     * {@link #release()}: for try-with-resources.
     *
     * @throws LeaseLostException if the lease had been lost
     */
    @Override
    public void close() {
        release();
    }

    @Override
    public synchronized String toString() {
        return getClass().getSimpleName() + "{key=" + key + ", token=" + Long.toUnsignedString(token) + ", kind=" + kind
                + ", " + state.name().toLowerCase(java.util.Locale.ROOT) + "}";
    }

    // The lease's thread reads its stream, and loses the lease when the
    // service says so or when its validity passes without a renewal.
    private void watch() {
        try {
            loop();
        } catch (RuntimeException | Error | InterruptedException e) {
            lose("the lease's watch failed: " + e.getClass().getSimpleName(), State.HELD);
        }
    }

    private void loop() throws InterruptedException {
        while (true) {
            FrameStream st;
            long left;
            synchronized (this) {
                if (state != State.HELD) {
                    return;
                }
                st = stream;
                left = deadline - System.nanoTime();
            }
            if (left <= 0) {
                lose("no renewal was confirmed within the lease's validity", State.HELD);
                return;
            }
            Map<String, Object> m;
            try {
                m = st.next(left);
            } catch (FrameStream.Timeout e) {
                continue;
            } catch (FrameStream.Broken e) {
                if (!resume(currentHandle(), -1)) {
                    return;
                }
                continue;
            } catch (TurnstileException e) {
                if (e.reason().equals("DRAINING") && resume(currentHandle(), st.index)) {
                    continue;
                }
                lose(e.getMessage(), State.HELD);
                return;
            }
            if (m == null) {
                if (!resume(currentHandle(), -1)) {
                    return;
                }
                continue;
            }
            Map<String, Object> renewed = Wire.obj(m, "renewed");
            Map<String, Object> lostMsg = Wire.obj(m, "lost");
            Map<String, Object> draining = Wire.obj(m, "draining");
            if (renewed != null) {
                long valid = Wire.durationOf(renewed, "validity").toNanos();
                synchronized (this) {
                    deadline = System.nanoTime() + valid;
                }
            } else if (lostMsg != null) {
                String why = Wire.str(lostMsg, "message");
                lose(why.isEmpty() ? "the service lost the lease" : why, State.HELD);
                return;
            } else if (draining != null) {
                Map<String, Object> h = Wire.obj(draining, "lease");
                if (!resume(h != null ? h : currentHandle(), st.index)) {
                    return;
                }
            }
        }
    }

    private synchronized Map<String, Object> currentHandle() {
        return handle;
    }

    // resume goes on holding the lease through another instance (or this
    // one, last) within its validity; false once the lease is lost.
    private boolean resume(Map<String, Object> h, int avoid) {
        FrameStream old;
        long until;
        synchronized (this) {
            if (state != State.HELD) {
                return false;
            }
            old = stream;
            until = deadline;
        }
        old.close();
        if (until - System.nanoTime() <= 0) {
            // Paused (a GC pause, a stopped process) past its validity: the
            // lock may be another's by now.
            lose("its stream ended after the lease's validity had run out", State.HELD);
            return false;
        }
        Map<String, Object> body = new java.util.LinkedHashMap<>();
        body.put("resume", h);
        if (ttlAsked != null) {
            body.put("ttl", Wire.duration(ttlAsked));
        }
        Held.Grant g;
        try {
            g = Held.open(t, "Locks", "Hold", body, null, true, avoid, until);
        } catch (TurnstileException e) {
            lose("the lease could not be resumed on another instance: " + e.getMessage(), State.HELD);
            return false;
        }
        synchronized (this) {
            if (state == State.HELD) {
                stream = g.stream;
                apply(g.grant);
                return true;
            }
        }
        g.stream.close();
        return false;
    }

    private void lose(String why, State from) {
        if (why.startsWith("turnstile: ")) {
            why = why.substring("turnstile: ".length());
        }
        LeaseLostException e;
        List<Consumer<? super LeaseLostException>> call;
        FrameStream st;
        synchronized (this) {
            if (state != from) {
                return;
            }
            state = State.LOST;
            e = new LeaseLostException("lease of \"" + key + "\" (token " + Long.toUnsignedString(token) + ") lost: " + why,
                    "failed_precondition", "LOCK_LOST");
            error = e;
            call = new ArrayList<>(listeners);
            listeners.clear();
            st = stream;
        }
        lost.complete(e);
        st.close();
        for (Consumer<? super LeaseLostException> l : call) {
            try {
                l.accept(e);
            } catch (RuntimeException x) {
                LOG.log(System.Logger.Level.WARNING, "turnstile: a lost listener of \"" + key + "\" failed", x);
            }
        }
    }
}
