package io.github.turnstilelock.turnstile;

/**
 * The bearer token's role or key prefixes do not allow the call (reasons
 * KEY_NOT_ALLOWED, ROLE_NOT_ALLOWED), or the store refused the service's own
 * user (STORE_PERMISSION).
 */
public class PermissionDeniedException extends TurnstileException {
    private static final long serialVersionUID = 1L;

    /**
     * The error.
     *
     * @param message what happened
     * @param code the Connect status code
     * @param reason the service's reason, or ""
     */
    public PermissionDeniedException(String message, String code, String reason) {
        super(message, code, reason);
    }
}
