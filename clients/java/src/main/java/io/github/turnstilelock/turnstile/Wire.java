package io.github.turnstilelock.turnstile;

import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * What travels on the wire besides JSON itself: Connect's stream envelopes,
 * and protobuf's JSON forms of durations and 64-bit numbers.
 */
final class Wire {
    private Wire() {
    }

    /** A message larger than this means a stream out of step: every message of the service is small. */
    static final int MAX_MESSAGE = 4 << 20;

    static final int FLAG_COMPRESSED = 0x01;
    static final int FLAG_END_STREAM = 0x02;

    /** The service's bounds of a TTL. */
    static final Duration MIN_TTL = Duration.ofMillis(200);
    static final Duration MAX_TTL = Duration.ofHours(24);

    /** message in a Connect envelope: a flags byte, a big-endian length, the JSON. */
    static byte[] frame(Map<String, Object> message) {
        byte[] data = Json.write(message).getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(5 + data.length);
        b.put((byte) 0).putInt(data.length).put(data);
        return b.array();
    }

    /** d as a protobuf Duration in JSON: "1.5s". */
    static String duration(Duration d) {
        BigDecimal secs = BigDecimal.valueOf(d.getSeconds()).add(BigDecimal.valueOf(d.getNano(), 9));
        String t = secs.stripTrailingZeros().toPlainString();
        return t + "s";
    }

    /** A protobuf Duration from JSON ("29.7s"); IllegalArgumentException if malformed. */
    static Duration parseDuration(Object v) {
        if (!(v instanceof String) || !((String) v).endsWith("s")) {
            throw new IllegalArgumentException("the service sent a malformed duration");
        }
        String t = (String) v;
        try {
            BigDecimal secs = new BigDecimal(t.substring(0, t.length() - 1));
            long whole = secs.longValue();
            long nanos = secs.subtract(BigDecimal.valueOf(whole)).movePointRight(9).longValue();
            return Duration.ofSeconds(whole, nanos);
        } catch (NumberFormatException | ArithmeticException e) {
            throw new IllegalArgumentException("the service sent a malformed duration");
        }
    }

    /** A duration field of m, or zero when it is absent. */
    static Duration durationOf(Map<String, Object> m, String name) {
        Object v = m.get(name);
        return v == null ? Duration.ZERO : parseDuration(v);
    }

    /**
     * A uint64 field of m: JSON carries it as a decimal string (0 when absent).
     * Values above Long.MAX_VALUE come out negative: compare them with
     * Long.compareUnsigned.
     */
    static long uint(Map<String, Object> m, String name) {
        Object v = m.get(name);
        if (v == null) {
            return 0;
        }
        try {
            if (v instanceof String) {
                return Long.parseUnsignedLong((String) v);
            }
            if (v instanceof Long) {
                return (Long) v;
            }
        } catch (NumberFormatException e) {
            // below
        }
        throw new IllegalArgumentException("the service sent a malformed number");
    }

    /** An int field of m (0 when absent). */
    static int int32(Map<String, Object> m, String name) {
        Object v = m.get(name);
        if (v == null) {
            return 0;
        }
        if (v instanceof Long && (Long) v == ((Long) v).intValue()) {
            return ((Long) v).intValue();
        }
        throw new IllegalArgumentException("the service sent a malformed number");
    }

    static String str(Map<String, Object> m, String name) {
        Object v = m.get(name);
        return v instanceof String ? (String) v : "";
    }

    static boolean bool(Map<String, Object> m, String name) {
        return Boolean.TRUE.equals(m.get(name));
    }

    /** An object field of m, or null. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> obj(Map<String, Object> m, String name) {
        Object v = m.get(name);
        return v instanceof Map ? (Map<String, Object>) v : null;
    }

    /** The objects of an array field of m (none when absent). */
    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> objs(Map<String, Object> m, String name) {
        Object v = m.get(name);
        if (!(v instanceof List)) {
            return List.of();
        }
        for (Object o : (List<?>) v) {
            if (!(o instanceof Map)) {
                throw new IllegalArgumentException("the service sent a malformed list");
            }
        }
        return (List<Map<String, Object>>) v;
    }

    /** ttl checked against the service's bounds, at once rather than after a round trip. */
    static Duration checkTtl(Duration ttl) {
        if (ttl == null) {
            throw new NullPointerException("ttl");
        }
        if (ttl.compareTo(MIN_TTL) < 0 || ttl.compareTo(MAX_TTL) > 0) {
            throw new IllegalArgumentException("turnstile: ttl " + ttl + " is not within 200ms to 24h");
        }
        return ttl;
    }

    static Duration checkWait(Duration wait) {
        if (wait == null) {
            throw new NullPointerException("wait");
        }
        if (wait.isNegative()) {
            throw new IllegalArgumentException("turnstile: wait " + wait + " is negative");
        }
        return wait;
    }

    static String checkKey(String key, String what) {
        if (key == null) {
            throw new NullPointerException(what);
        }
        if (key.isEmpty()) {
            throw new IllegalArgumentException("turnstile: empty " + what);
        }
        return key;
    }
}
