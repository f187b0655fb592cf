package io.github.turnstilelock.turnstile;

import java.util.Objects;

/** The tests' assertions: each failure is an AssertionError with what was wanted. */
final class Check {
    private Check() {
    }

    interface Call {
        void run() throws Exception;
    }

    static void isTrue(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static void equal(Object want, Object got, String what) {
        if (!Objects.equals(want, got)) {
            throw new AssertionError(what + ": got " + got + ", want " + want);
        }
    }

    static void less(double a, double b, String what) {
        if (!(a < b)) {
            throw new AssertionError(what + ": " + a + " is not below " + b);
        }
    }

    /** The exception call throws, which must be a want. */
    static <T extends Throwable> T raises(Class<T> want, Call call) {
        try {
            call.run();
        } catch (Throwable e) {
            if (want.isInstance(e)) {
                return want.cast(e);
            }
            throw new AssertionError("want " + want.getSimpleName() + ", got " + e, e);
        }
        throw new AssertionError("want " + want.getSimpleName() + ", nothing was thrown");
    }

    static void excludes(String text, String secret, String what) {
        if (secret != null && !secret.isEmpty() && text != null && text.contains(secret)) {
            throw new AssertionError(what + " shows a secret");
        }
    }
}
