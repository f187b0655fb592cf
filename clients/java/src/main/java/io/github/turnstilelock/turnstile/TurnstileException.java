package io.github.turnstilelock.turnstile;

/**
 * An error of the turnstile service, or of reaching it. Every error of the
 * client is one: {@link NotAcquiredException}, {@link LeaseLostException},
 * {@link PermissionDeniedException} (and {@link UnauthenticatedException}),
 * {@link UnavailableException}, {@link UnsupportedException},
 * {@link InvalidArgumentException}, or this class for the rest.
 *
 * <p>Messages never include the bearer token: the service leaves it out of
 * its own, and the client builds its messages from addresses and keys.
 */
public class TurnstileException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String code;
    private final String reason;

    /**
     * An error with Connect's status code and the service's reason.
     *
     * @param message what happened
     * @param code the Connect status code ("aborted", "unavailable", ...)
     * @param reason the service's reason ("NOT_ACQUIRED", ...), or ""
     */
    public TurnstileException(String message, String code, String reason) {
        super(message);
        this.code = code == null ? "unknown" : code;
        this.reason = reason == null ? "" : reason;
    }

    /**
     * The Connect status code: "aborted", "failed_precondition",
     * "unavailable", "permission_denied", ...
     *
     * @return the code
     */
    public String code() {
        return code;
    }

    /**
     * The service's reason, one of the names of the .proto's ErrorReason
     * ("NOT_ACQUIRED", "LOCK_LOST", "NO_TOKEN", ...), or "" if it gave none.
     *
     * @return the reason
     */
    public String reason() {
        return reason;
    }
}
