package io.github.turnstilelock.turnstile;

/**
 * The service refused the request as malformed: a bad key, TTL, or option.
 */
public class InvalidArgumentException extends TurnstileException {
    private static final long serialVersionUID = 1L;

    /**
     * The error.
     *
     * @param message what happened
     * @param code the Connect status code
     * @param reason the service's reason, or ""
     */
    public InvalidArgumentException(String message, String code, String reason) {
        super(message, code, reason);
    }
}
