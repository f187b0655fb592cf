package io.github.turnstilelock.turnstile;

/**
 * Who leads an election.
 *
 * @param elected whether anyone leads
 * @param value what the leader gave as its value (an address, a host name)
 * @param term the leader's term: its lease's fencing token
 * @param owner the owner id the leader holds the election's lock under
 */
public record Leader(boolean elected, String value, long term, String owner) {
}
