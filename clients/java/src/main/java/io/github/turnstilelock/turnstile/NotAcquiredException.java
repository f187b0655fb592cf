package io.github.turnstilelock.turnstile;

/**
 * Another owner held the lock for the whole wait (or at once, for a try).
 */
public class NotAcquiredException extends TurnstileException {
    private static final long serialVersionUID = 1L;

    /**
     * The error.
     *
     * @param message what happened
     * @param code the Connect status code
     * @param reason the service's reason, or ""
     */
    public NotAcquiredException(String message, String code, String reason) {
        super(message, code, reason);
    }
}
