package io.github.turnstilelock.turnstile;

import java.util.Map;

/** How the service's errors map to the client's exceptions. */
final class Errors {
    private Errors() {
    }

    /** The exception for an error the service sent: its reason first, then its code. */
    static TurnstileException fromService(String code, String message, String reason) {
        String text = message == null || message.isEmpty() ? code : message;
        if (text.startsWith("turnstile: ")) {
            text = text.substring("turnstile: ".length());
        }
        if (!reason.isEmpty() && !text.contains(reason)) {
            text = text + " (" + reason + ")";
        }
        switch (reason) {
            case "NOT_ACQUIRED":
                return new NotAcquiredException(text, code, reason);
            case "NOT_HELD":
            case "LOCK_LOST":
                return new LeaseLostException(text, code, reason);
            default:
                break;
        }
        switch (code) {
            case "permission_denied":
                return new PermissionDeniedException(text, code, reason);
            case "unauthenticated":
                return new UnauthenticatedException(text, code, reason);
            case "unavailable":
                return new UnavailableException(text, code, reason);
            case "unimplemented":
                return new UnsupportedException(text, code, reason);
            case "invalid_argument":
                return new InvalidArgumentException(text, code, reason);
            default:
                return new TurnstileException(text, code, reason);
        }
    }

    /** The exception for a Connect error object {"code", "message", "details"}. */
    static TurnstileException fromObject(Map<String, Object> err, String reason, String where) {
        if (err == null) {
            return new TurnstileException(where + ": a malformed error", "unknown", "");
        }
        String code = err.get("code") instanceof String ? (String) err.get("code") : "unknown";
        String message = Wire.str(err, "message");
        if (reason.isEmpty()) {
            for (Map<String, Object> d : Wire.objs(err, "details")) {
                Map<String, Object> debug = Wire.obj(d, "debug");
                if (debug != null && "turnstile".equals(debug.get("domain")) && debug.get("reason") instanceof String) {
                    reason = (String) debug.get("reason");
                }
            }
        }
        return fromService(code, message, reason);
    }

    /** Connect's code for an HTTP status that is not Connect's own answer (a proxy's page). */
    static String codeOfHttpStatus(int status) {
        switch (status) {
            case 401:
                return "unauthenticated";
            case 403:
                return "permission_denied";
            case 404:
                return "unimplemented";
            case 429:
            case 502:
            case 503:
            case 504:
                return "unavailable";
            case 400:
                return "internal";
            default:
                return "unknown";
        }
    }

    /** The first reason of a Turnstile-Reason header's values. */
    static String reasonOf(String header) {
        if (header == null) {
            return "";
        }
        int comma = header.indexOf(',');
        return (comma < 0 ? header : header.substring(0, comma)).strip();
    }
}
