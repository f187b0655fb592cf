package io.github.turnstilelock.turnstile;

/**
 * No instance of the service could be reached, or the store behind it failed
 * (then the outcome of the call is unknown), or the service is draining.
 */
public class UnavailableException extends TurnstileException {
    private static final long serialVersionUID = 1L;

    /**
     * The error.
     *
     * @param message what happened
     * @param code the Connect status code
     * @param reason the service's reason, or ""
     */
    public UnavailableException(String message, String code, String reason) {
        super(message, code, reason);
    }
}
