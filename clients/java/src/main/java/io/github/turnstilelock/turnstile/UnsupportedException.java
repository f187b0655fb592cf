package io.github.turnstilelock.turnstile;

/**
 * The service's store has no such lock kind or operation.
 */
public class UnsupportedException extends TurnstileException {
    private static final long serialVersionUID = 1L;

    /**
     * The error.
     *
     * @param message what happened
     * @param code the Connect status code
     * @param reason the service's reason, or ""
     */
    public UnsupportedException(String message, String code, String reason) {
        super(message, code, reason);
    }
}
