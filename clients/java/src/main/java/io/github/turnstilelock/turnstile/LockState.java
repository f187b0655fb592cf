package io.github.turnstilelock.turnstile;

import java.util.List;

/**
 * A lock's state: who holds it.
 *
 * @param key the key
 * @param held whether anyone holds it
 * @param holders the holders (several for shared locks and semaphores)
 * @param token the highest fencing token the store issued for the key (0: none, or it cannot tell)
 * @param waiters owners queued in the store; -1 when the store keeps no queue it can count
 */
public record LockState(String key, boolean held, List<Holder> holders, long token, int waiters) {
    /**
     * A lock's state.
     *
     * @param key the key
     * @param held whether anyone holds it
     * @param holders the holders
     * @param token the highest token issued
     * @param waiters the owners queued, or -1
     */
    public LockState {
        holders = List.copyOf(holders);
    }
}
