package io.github.turnstilelock.turnstile;

import java.util.List;

/**
 * The held locks {@link Client#list} found.
 *
 * @param locks the locks, by key
 * @param more whether the limit cut the list short
 */
public record LockList(List<LockState> locks, boolean more) {
    /**
     * The locks found.
     *
     * @param locks the locks
     * @param more whether there are more
     */
    public LockList {
        locks = List.copyOf(locks);
    }
}
