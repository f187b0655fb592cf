package io.github.turnstilelock.turnstile;

/**
 * No bearer token, or one the service does not know (reason NO_TOKEN).
 */
public class UnauthenticatedException extends PermissionDeniedException {
    private static final long serialVersionUID = 1L;

    /**
     * The error.
     *
     * @param message what happened
     * @param code the Connect status code
     * @param reason the service's reason, or ""
     */
    public UnauthenticatedException(String message, String code, String reason) {
        super(message, code, reason);
    }
}
