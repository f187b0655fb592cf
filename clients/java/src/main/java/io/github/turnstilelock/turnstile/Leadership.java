package io.github.turnstilelock.turnstile;

import java.time.Duration;

/**
 * A won election: a {@link Lease} of the election's lock whose term is its
 * fencing token. {@link #close()} (or {@link #resign()}) resigns, and the
 * next candidate is elected at once; {@link #lost()} completes the moment
 * the leadership is lost.
 */
public final class Leadership extends Lease {
    private final String value;

    Leadership(Transport t, Held.Grant g, Duration ttlAsked, String value) {
        super(t, g, ttlAsked, "Elections", "Resign");
        this.value = value;
    }

    /**
     * The term: greater than every earlier leader's. Pass it to the storage
     * the leader writes to, as a lease's token.
     *
     * @return the term
     */
    public long term() {
        return token();
    }

    /**
     * What observers see as the leader's value.
     *
     * @return the value
     */
    public String value() {
        return value;
    }

    /**
     * Resigns: {@link #release()}.
     *
     * @throws LeaseLostException if the leadership had been lost
     */
    public void resign() {
        release();
    }
}
