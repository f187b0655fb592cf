package io.github.turnstilelock.turnstile;

/**
 * The lease ended while it was meant to be held: its renewal was refused, the
 * lock was removed by force, or no renewal was confirmed within its validity.
 * Work done under it may have overlapped with the next holder's: the storage's
 * fence (the lease's token) is what refuses its late writes.
 */
public class LeaseLostException extends TurnstileException {
    private static final long serialVersionUID = 1L;

    /**
     * The error.
     *
     * @param message what happened
     * @param code the Connect status code
     * @param reason the service's reason, or ""
     */
    public LeaseLostException(String message, String code, String reason) {
        super(message, code, reason);
    }
}
