package io.github.turnstilelock.turnstile;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import javax.net.ssl.SSLContext;

/**
 * A client of the turnstile lock service ({@code turnstile serve}), with the
 * JDK's {@code java.net.http} only.
 *
 * <pre>{@code
 * Client client = new Client("http://127.0.0.1:7070");
 * try (Lease lease = client.acquire("lock:order:42", Duration.ofSeconds(10))) {
 *     db.write(row, lease.token());   // lease.lost() completes the moment the lease is lost
 * }
 * }</pre>
 *
 * <p>The service renews a held lease for as long as it is held (its Hold
 * stream); a client that dies loses the lock within its TTL, at once if its
 * connection closes. Calls go to the instance the last call went to, and to
 * the next when it cannot be reached or drains. A client is safe to use
 * from several threads; its threads are daemons.
 */
public final class Client {
    private final Transport t;
    private final boolean hasToken;

    /**
     * A client of the instances of url, without a bearer token or TLS options.
     *
     * @param url one instance ("http://127.0.0.1:7070"), or several of one
     *     service ("http://h1:7070,h2:7070"); https:// verifies the instance
     *     against the JDK's default authorities
     * @throws IllegalArgumentException if url is malformed
     */
    public Client(String url) {
        this(builder(url));
    }

    private Client(Builder b) {
        List<Address> addresses = Address.parse(b.urls);
        boolean tls = addresses.stream().anyMatch(a -> a.scheme().equals("https"));
        if (!tls && (b.ssl != null || b.caFile != null)) {
            throw new IllegalArgumentException("turnstile: TLS options given for http:// addresses: use https://");
        }
        SSLContext ssl = b.ssl;
        if (tls && ssl == null && b.caFile != null) {
            ssl = Tls.trusting(b.caFile);
        }
        this.t = new Transport(addresses, b.token, ssl, b.connectTimeout, b.timeout);
        this.hasToken = b.token != null;
    }

    /**
     * A builder of a client of the instances of urls.
     *
     * @param urls each the URL of one instance or of several ("https://h1:7070,h2:7070")
     * @return the builder
     */
    public static Builder builder(String... urls) {
        return new Builder(List.of(urls));
    }

    /** Options of a {@link Client}: {@code Client.builder(url).token(secret).caFile(path).build()}. */
    public static final class Builder {
        private final List<String> urls;
        private String token;
        private SSLContext ssl;
        private Path caFile;
        private Duration connectTimeout = Duration.ofSeconds(5);
        private Duration timeout = Duration.ofSeconds(30);

        private Builder(List<String> urls) {
            this.urls = new ArrayList<>(urls);
        }

        /**
         * The bearer token, NAME.SECRET as {@code turnstile serve token} prints
         * it: sent with every call, never shown (toString, errors).
         *
         * @param token the token
         * @return this builder
         */
        public Builder token(String token) {
            Objects.requireNonNull(token, "token");
            if (token.isEmpty() || token.chars().anyMatch(c -> c <= 0x20 || c == 0x7f)) {
                throw new IllegalArgumentException("turnstile: the bearer token must be non-empty, without spaces or control"
                        + " characters (NAME.SECRET, as \"turnstile serve token\" prints it)");
            }
            this.token = token;
            return this;
        }

        /**
         * Verify https:// instances against the authorities of this PEM file
         * (the service's --cert-file signer), rather than the JDK's.
         *
         * @param caFile a PEM file of one or more certificates
         * @return this builder
         */
        public Builder caFile(Path caFile) {
            this.caFile = Objects.requireNonNull(caFile, "caFile");
            return this;
        }

        /**
         * The TLS context of https:// calls: your own trust, and a client
         * certificate for a service that requires one (--ca-file).
         *
         * @param ssl the context
         * @return this builder
         */
        public Builder sslContext(SSLContext ssl) {
            this.ssl = Objects.requireNonNull(ssl, "ssl");
            return this;
        }

        /**
         * How long reaching one instance may take (default 5 s).
         *
         * @param d the timeout
         * @return this builder
         */
        public Builder connectTimeout(Duration d) {
            this.connectTimeout = positive(d, "connectTimeout");
            return this;
        }

        /**
         * How long a call that does not wait for a lock may take (default 30 s).
         *
         * @param d the timeout
         * @return this builder
         */
        public Builder timeout(Duration d) {
            this.timeout = positive(d, "timeout");
            return this;
        }

        /**
         * The client.
         *
         * @return the client
         * @throws IllegalArgumentException if an address or option is malformed
         */
        public Client build() {
            return new Client(this);
        }

        private static Duration positive(Duration d, String what) {
            Objects.requireNonNull(d, what);
            if (d.isNegative() || d.isZero()) {
                throw new IllegalArgumentException("turnstile: " + what + " must be positive");
            }
            return d;
        }
    }

    Transport transport() {
        return t;
    }

    /**
     * Waits for the lock on key (up to the service's --max-wait) and holds it,
     * renewed by the service until the lease is released.
     *
     * @param key the lock's key
     * @param ttl how long the store keeps the lock if this client vanishes (200 ms to 24 h)
     * @return the lease: close it to release the lock
     * @throws NotAcquiredException if the wait ended first
     * @throws UnavailableException if no instance answered
     * @throws PermissionDeniedException if the token may not take the key
     */
    public Lease acquire(String key, Duration ttl) {
        return lock(key).ttl(ttl).acquire();
    }

    /**
     * Waits up to wait for the lock on key and holds it, as
     * {@link #acquire(String, Duration)} does. Instances that cannot be
     * reached are tried again within the wait.
     *
     * @param key the lock's key
     * @param ttl how long the store keeps the lock if this client vanishes
     * @param wait how long to wait; zero makes one attempt
     * @return the lease: close it to release the lock
     * @throws NotAcquiredException if the wait ended first
     * @throws UnavailableException if no instance answered within the wait
     */
    public Lease acquire(String key, Duration ttl, Duration wait) {
        return lock(key).ttl(ttl).waitFor(wait).acquire();
    }

    /**
     * Takes the lock on key if it is free, and holds it.
     *
     * @param key the lock's key
     * @param ttl how long the store keeps the lock if this client vanishes
     * @return the lease: close it to release the lock
     * @throws NotAcquiredException if another owner holds it
     */
    public Lease tryAcquire(String key, Duration ttl) {
        return lock(key).ttl(ttl).tryAcquire();
    }

    /**
     * A lock to take with more options: its kind, a semaphore's permits.
     *
     * @param key the lock's key
     * @return the request, taken by its acquire() or tryAcquire()
     */
    public LockRequest lock(String key) {
        return new LockRequest(this, key);
    }

    Lease held(Held.Grant g, Duration ttl) {
        Lease l;
        try {
            l = new Lease(t, g, ttl, "Locks", "Release");
        } catch (RuntimeException e) {
            g.stream.close();
            throw e;
        }
        l.start();
        return l;
    }

    /**
     * Who holds key's plain lock (read role).
     *
     * @param key the key
     * @return its state
     */
    public LockState status(String key) {
        return status(key, Kind.LOCK, 0);
    }

    /**
     * Who holds key's lock of a kind (read role).
     *
     * @param key the key
     * @param kind the kind
     * @param permits a semaphore's permits (0 for the other kinds)
     * @return its state
     */
    public LockState status(String key, Kind kind, int permits) {
        return stateOf(Wire.obj(t.unary("Locks", "Status", kindBody("key", Wire.checkKey(key, "key"), kind, permits), null), "state"));
    }

    /**
     * The held locks under prefix (read role), at most 1000.
     *
     * @param prefix the keys' prefix; "" for a token limited to one prefix lists under it
     * @return the locks
     */
    public LockList list(String prefix) {
        Objects.requireNonNull(prefix, "prefix");
        Map<String, Object> m = t.unary("Locks", "List", Map.of("prefix", prefix), null);
        List<LockState> out = new ArrayList<>();
        for (Map<String, Object> s : Wire.objs(m, "locks")) {
            out.add(stateOf(s));
        }
        return new LockList(out, Wire.bool(m, "more"));
    }

    /**
     * Removes the lock on key whoever holds it, raising its fence first (admin
     * role): its holder is told its lease is lost, and every later token is
     * greater than the returned state's token.
     *
     * @param key the key
     * @return the state removed (held false if nobody held it)
     */
    public LockState forceRelease(String key) {
        return stateOf(Wire.obj(t.unary("Locks", "ForceRelease", Map.of("key", Wire.checkKey(key, "key")), null), "removed"));
    }

    /**
     * The instance and its store: which lock kinds it has (read role).
     *
     * @return the description
     */
    public Info info() {
        Map<String, Object> m = t.unary("Locks", "Info", Map.of(), null);
        List<Kind> kinds = new ArrayList<>();
        Object ks = m.get("kinds");
        if (ks instanceof List) {
            for (Object k : (List<?>) ks) {
                Kind kind = k instanceof String ? Kind.ofWire((String) k) : null;
                if (kind != null) {
                    kinds.add(kind);
                }
            }
        }
        return new Info(Wire.str(m, "store"), kinds, Wire.bool(m, "storeNotices"), Wire.bool(m, "storeQueue"),
                Wire.str(m, "version"), Wire.str(m, "instance"), Wire.durationOf(m, "defaultTtl"), Wire.durationOf(m, "maxWait"));
    }

    /**
     * The election of name.
     *
     * @param name the election's name: the key of its lock
     * @return the election
     */
    public Election election(String name) {
        return new Election(this, Wire.checkKey(name, "election name"));
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder("Client{");
        String sep = "";
        for (Address a : t.addresses) {
            b.append(sep).append(a);
            sep = ",";
        }
        return b.append(hasToken ? ", token=<hidden>}" : "}").toString();
    }

    private static Map<String, Object> kindBody(String name, String key, Kind kind, int permits) {
        Objects.requireNonNull(kind, "kind");
        Map<String, Object> b = new LinkedHashMap<>();
        b.put(name, key);
        b.put("kind", kind.wire());
        if (kind == Kind.SEMAPHORE && (permits < 1 || permits > 1 << 16)) {
            throw new IllegalArgumentException("turnstile: a semaphore needs permits from 1 to 65536, got " + permits);
        }
        if (kind != Kind.SEMAPHORE && permits != 0) {
            throw new IllegalArgumentException("turnstile: permits given for a " + kind + " lock: only a semaphore has permits");
        }
        if (permits != 0) {
            b.put("permits", permits);
        }
        return b;
    }

    private static LockState stateOf(Map<String, Object> m) {
        if (m == null) {
            m = Map.of();
        }
        List<Holder> holders = new ArrayList<>();
        for (Map<String, Object> h : Wire.objs(m, "holders")) {
            boolean session = Wire.bool(h, "session");
            holders.add(new Holder(Wire.str(h, "owner"), Wire.uint(h, "token"), session ? null : Wire.durationOf(h, "ttl"), session));
        }
        return new LockState(Wire.str(m, "key"), Wire.bool(m, "held"), holders, Wire.uint(m, "token"), Wire.int32(m, "waiters"));
    }
}
