package io.github.turnstilelock.turnstile;

/**
 * The kinds of lock. Every store offers the kinds it can give safely; another
 * is refused with {@link UnsupportedException}. {@link Client#info()} lists
 * the store's.
 */
public enum Kind {
    /** The plain exclusive lock. */
    LOCK("KIND_LOCK"),
    /** The read side of the key's read-write lock: shared with other readers. */
    SHARED("KIND_SHARED"),
    /** The write side of the key's read-write lock: alone. */
    EXCLUSIVE("KIND_EXCLUSIVE"),
    /** One of the permits of the key's semaphore. */
    SEMAPHORE("KIND_SEMAPHORE"),
    /** The plain lock, waiting first come first served in the store. */
    FAIR("KIND_FAIR");

    private final String wire;

    Kind(String wire) {
        this.wire = wire;
    }

    /** The kind's name in the service's JSON ("KIND_SHARED"). */
    String wire() {
        return wire;
    }

    /** The kind the service names, LOCK for none; null for one this client does not know. */
    static Kind ofWire(String name) {
        if (name == null || name.isEmpty() || name.equals("KIND_UNSPECIFIED")) {
            return LOCK;
        }
        for (Kind k : values()) {
            if (k.wire.equals(name)) {
                return k;
            }
        }
        return null;
    }
}
