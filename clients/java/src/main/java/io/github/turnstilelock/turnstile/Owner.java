package io.github.turnstilelock.turnstile;

import java.io.IOException;
import java.net.InetAddress;
import java.security.SecureRandom;
import java.util.HexFormat;

/** The owner ids of the locks a client takes itself (tryAcquire). */
final class Owner {
    private Owner() {
    }

    private static final SecureRandom RANDOM = new SecureRandom();

    /**
     * An owner id for a lock this client takes itself: who holds it, for the
     * operator reading status, and 128 random bits.
     */
    static String newId() {
        byte[] r = new byte[16];
        RANDOM.nextBytes(r);
        return OwnerPrefix.VALUE + "/" + HexFormat.of().formatHex(r);
    }

    // The host and process, found once (a host name may take a DNS look-up).
    private static final class OwnerPrefix {
        static final String VALUE = make();

        private static String make() {
            String host;
            try {
                host = InetAddress.getLocalHost().getHostName();
            } catch (IOException e) {
                host = "host";
            }
            host = host.replaceAll("[^A-Za-z0-9._-]", "_");
            if (host.length() > 64) {
                host = host.substring(0, 64);
            }
            return "java-" + (host.isEmpty() ? "host" : host) + "-" + ProcessHandle.current().pid();
        }
    }
}
