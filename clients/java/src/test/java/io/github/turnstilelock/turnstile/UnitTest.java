package io.github.turnstilelock.turnstile;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/** What the client checks and shows without a service. */
final class UnitTest {
    void testAddressForms() {
        List<Address> a = Address.parse(List.of("http://h1:7070,h2,[::1]:8080/base/"));
        Check.equal(List.of("h1:7070", "h2:7070", "[::1]:8080"), a.stream().map(Address::name).toList(), "names");
        Check.equal("/base", a.get(0).prefix(), "prefix");
        Check.equal("http://h1:7070/base/turnstile.v1.Locks/Hold", a.get(0).uri("Locks", "Hold").toString(), "uri");
        List<Address> b = Address.parse(List.of("https://a:1", "http://b"));
        Check.equal("https", b.get(0).scheme(), "scheme");
        Check.equal(7070, b.get(1).port(), "default port");
    }

    void testAddressesRefused() {
        for (String bad : new String[] {"", "h:7070", "ftp://h", "http://", "http://h:0", "http://h:x", "http://h,", "http://::1:70",
                "http://h/?q=1", "http://[::1", "http://h:99999", "http://h h", "http://h:", "http://[::1]:",
                "http://127.0.0.1:1,http://127.0.0.1:2"}) {
            Check.raises(IllegalArgumentException.class, () -> Address.parse(List.of(bad)));
        }
        IllegalArgumentException e = Check.raises(IllegalArgumentException.class,
                () -> Address.parse(List.of("http://name:s3cret@h:7070")));
        Check.excludes(e.getMessage(), "s3cret", "the error");
        Check.raises(IllegalArgumentException.class, () -> Address.parse(List.of()));
    }

    void testClientHidesItsToken() {
        Client c = Client.builder("http://127.0.0.1:7070").token("orders.s3cretsecret").build();
        Check.excludes(c.toString(), "s3cret", "toString");
        Check.isTrue(c.toString().contains("hidden"), "toString says a token is set");
        for (String bad : new String[] {"a b", "x\n", ""}) {
            IllegalArgumentException e = Check.raises(IllegalArgumentException.class,
                    () -> Client.builder("http://h").token(bad));
            Check.excludes(e.getMessage(), bad.strip(), "the error");
        }
        Check.raises(IllegalArgumentException.class,
                () -> Client.builder("http://h").caFile(java.nio.file.Path.of("/nonexistent")).build());
    }

    void testDurations() {
        Check.equal("10s", Wire.duration(Duration.ofSeconds(10)), "10 s");
        Check.equal("1.5s", Wire.duration(Duration.ofMillis(1500)), "1.5 s");
        Check.equal("0.000000001s", Wire.duration(Duration.ofNanos(1)), "1 ns");
        Check.equal(Duration.ofNanos(987490021), Wire.parseDuration("0.987490021s"), "parsed");
        Check.equal(Duration.ofSeconds(30), Wire.parseDuration("30s"), "parsed whole");
        for (Object bad : new Object[] {"30", "s", "1.5ms", 30L, null, "x.5s"}) {
            Check.raises(IllegalArgumentException.class, () -> Wire.parseDuration(bad));
        }
        Check.raises(IllegalArgumentException.class, () -> Wire.checkTtl(Duration.ofMillis(10)));
        Check.raises(IllegalArgumentException.class, () -> Wire.checkTtl(Duration.ofDays(2)));
        Check.raises(IllegalArgumentException.class, () -> Wire.checkWait(Duration.ofSeconds(-1)));
    }

    void testFrame() {
        byte[] f = Wire.frame(Map.of("key", "k"));
        ByteBuffer b = ByteBuffer.wrap(f);
        Check.equal(0, (int) b.get(), "flags");
        Check.equal(f.length - 5, b.getInt(), "length");
        Check.equal("{\"key\":\"k\"}", new String(f, 5, f.length - 5, StandardCharsets.UTF_8), "message");
    }

    void testJson() {
        Map<String, Object> m = Json.parseObject(
                "{\"a\":\"x\\u00e9\\n\",\"b\":[1,-2.5e3,true,false,null],\"c\":{\"token\":\"18446744073709551615\"},\"d\":12345678901234}");
        Check.equal("xé\n", m.get("a"), "string");
        Check.equal(List.of(1L, -2500.0, true, false), ((List<?>) m.get("b")).subList(0, 4), "array");
        Check.equal(-1L, Wire.uint(Wire.obj(m, "c"), "token"), "uint64 max, as Java's long bits");
        Check.equal(12345678901234L, m.get("d"), "long");
        Check.equal("{\"k\":\"a\\\"b\\\\\\u0001\"}", Json.write(Map.of("k", "a\"b\\\u0001")), "written");
        Check.equal("[1,true,null]", Json.write(java.util.Arrays.asList(1L, true, null)), "written list");
        for (String bad : new String[] {"", "{", "{\"a\"}", "{\"a\":}", "[1,]", "{\"a\":1}x", "\"\\q\"", "nul", "{\"a\":\"\u0001\"}",
                "[".repeat(100) + "]".repeat(100), "{\"a\":1,}", "01x"}) {
            Check.raises(IllegalArgumentException.class, () -> Json.parse(bad));
        }
    }

    void testErrorMapping() {
        Object[][] cases = {
            {"aborted", "NOT_ACQUIRED", NotAcquiredException.class},
            {"failed_precondition", "NOT_HELD", LeaseLostException.class},
            {"failed_precondition", "LOCK_LOST", LeaseLostException.class},
            {"permission_denied", "KEY_NOT_ALLOWED", PermissionDeniedException.class},
            {"unauthenticated", "NO_TOKEN", UnauthenticatedException.class},
            {"unavailable", "STORE_UNAVAILABLE", UnavailableException.class},
            {"unimplemented", "UNSUPPORTED", UnsupportedException.class},
            {"invalid_argument", "INVALID_TTL", InvalidArgumentException.class},
            {"internal", "", TurnstileException.class},
        };
        for (Object[] c : cases) {
            TurnstileException e = Errors.fromService((String) c[0], "turnstile: why", (String) c[1]);
            Check.equal(c[2], e.getClass(), "class of " + c[0]);
            Check.equal(c[0], e.code(), "code");
            Check.equal(c[1], e.reason(), "reason");
            Check.isTrue(e.getMessage().startsWith("why"), "message " + e.getMessage());
        }
        Check.isTrue(PermissionDeniedException.class.isAssignableFrom(UnauthenticatedException.class), "Unauthenticated is a PermissionDenied");
        TurnstileException e = Errors.fromObject(Json.parseObject("{\"code\":\"aborted\",\"message\":\"m\",\"details\":[{\"type\":\"google.rpc.ErrorInfo\","
                + "\"debug\":{\"reason\":\"NOT_ACQUIRED\",\"domain\":\"turnstile\"}}]}"), "", "h:1");
        Check.equal(NotAcquiredException.class, e.getClass(), "from the details");
    }

    void testLockRequestChecks() {
        Client c = new Client("http://127.0.0.1:1");
        Check.raises(IllegalArgumentException.class, () -> c.lock(""));
        Check.raises(NullPointerException.class, () -> c.lock(null));
        Check.raises(IllegalArgumentException.class, () -> c.lock("k").kind(Kind.SEMAPHORE));
        Check.raises(IllegalArgumentException.class, () -> c.lock("k").semaphore(0));
        Check.raises(IllegalArgumentException.class, () -> c.lock("k").semaphore(1 << 17));
        Check.raises(IllegalArgumentException.class, () -> c.status("k", Kind.LOCK, 2));
        Check.raises(IllegalArgumentException.class, () -> c.acquire("k", Duration.ofMillis(1)));
        Check.equal(Kind.SHARED, Kind.ofWire("KIND_SHARED"), "kind");
        Check.equal(Kind.LOCK, Kind.ofWire(""), "the default kind");
    }
}
