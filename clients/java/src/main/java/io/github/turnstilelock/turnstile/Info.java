package io.github.turnstilelock.turnstile;

import java.time.Duration;
import java.util.List;

/**
 * An instance of the service and its store.
 *
 * @param store the store, as it names itself ("redis 10.0.0.5:6379")
 * @param kinds the lock kinds the store has (those this client knows)
 * @param storeNotices whether the store sends release notices
 * @param storeQueue whether the store queues waiters itself (etcd, ZooKeeper)
 * @param version the service's version
 * @param instance the instance's id
 * @param defaultTtl the TTL of a request that names none
 * @param maxWait the longest a call waits for a lock
 */
public record Info(String store, List<Kind> kinds, boolean storeNotices, boolean storeQueue, String version,
                   String instance, Duration defaultTtl, Duration maxWait) {
    /**
     * An instance's description.
     *
     * @param store the store
     * @param kinds its kinds
     * @param storeNotices whether it sends release notices
     * @param storeQueue whether it queues waiters
     * @param version the version
     * @param instance the instance's id
     * @param defaultTtl the default TTL
     * @param maxWait the longest wait
     */
    public Info {
        kinds = List.copyOf(kinds);
    }
}
