package io.github.turnstilelock.turnstile;

import java.time.Duration;

/**
 * One holder of a lock, as {@link Client#status} shows it.
 *
 * @param owner the owner id it holds the lock under
 * @param token its fencing token
 * @param ttl the time left unless renewed; null when a session bounds the lease
 * @param session whether a session of the store bounds the lease
 */
public record Holder(String owner, long token, Duration ttl, boolean session) {
}
