package io.github.turnstilelock.turnstile;

import java.io.IOException;
import java.net.ConnectException;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLHandshakeException;

/**
 * Calls to the service's instances over Connect's protocol with JSON, on
 * HTTP/1.1: unary calls as application/json, streams as
 * application/connect+json.
 *
 * <p>Failing over between instances, as the Go client does: a call goes to
 * the instance the last one went to. An instance that cannot be reached (the
 * call never left) or that drains (it did nothing) is passed over for a
 * while and the call goes to the next one at once. A connection that breaks
 * during a call leaves its outcome unknown: the call fails with
 * UnavailableException and the instance is passed over for a while.
 */
final class Transport {
    static final String VERSION = "0.1.0";

    /** How long an instance that failed is passed over. */
    static final long SKIP_FOR_NANOS = TimeUnit.SECONDS.toNanos(2);

    /** An attempt on one instance that did not reach it. */
    static final class Miss {
        final Address address;
        final String what;

        Miss(Address address, String what) {
            this.address = address;
            this.what = what;
        }
    }

    final List<Address> addresses;
    final Duration connectTimeout;
    final Duration timeout;
    private final String bearer;
    private final HttpClient http;
    private final long[] skipUntil;
    private int current;

    Transport(List<Address> addresses, String bearer, javax.net.ssl.SSLContext ssl, Duration connectTimeout, Duration timeout) {
        this.addresses = addresses;
        this.bearer = bearer;
        this.connectTimeout = connectTimeout;
        this.timeout = timeout;
        this.skipUntil = new long[addresses.size()];
        HttpClient.Builder b = HttpClient.newBuilder()
                // HTTP/1.1: a stream is a connection of its own, which closing
                // the stream closes, and the service releases its lock at once.
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(connectTimeout)
                .followRedirects(HttpClient.Redirect.NEVER);
        if (ssl != null) {
            b.sslContext(ssl);
        }
        this.http = b.build();
    }

    /** The instances to try, in turn: the current one first, those passed over (and avoid) last. */
    synchronized List<Integer> order(int avoid) {
        int n = addresses.size();
        long now = System.nanoTime();
        List<Integer> fresh = new ArrayList<>();
        List<Integer> stale = new ArrayList<>();
        for (int k = 0; k < n; k++) {
            int i = (current + k) % n;
            if (i != avoid && skipUntil[i] - now <= 0) {
                fresh.add(i);
            } else {
                stale.add(i);
            }
        }
        fresh.addAll(stale);
        return fresh;
    }

    synchronized void skip(int i) {
        skipUntil[i] = System.nanoTime() + SKIP_FOR_NANOS;
        if (current == i) {
            current = (i + 1) % addresses.size();
        }
    }

    synchronized void use(int i) {
        current = i;
    }

    private HttpRequest.Builder request(int i, String service, String method, boolean streaming) {
        HttpRequest.Builder r = HttpRequest.newBuilder(addresses.get(i).uri(service, method))
                .header("Content-Type", streaming ? "application/connect+json" : "application/json")
                .header("Connect-Protocol-Version", "1")
                .header("User-Agent", "turnstile-java/" + VERSION);
        if (bearer != null) {
            r.header("Authorization", "Bearer " + bearer);
        }
        return r;
    }

    /** The error of a call no instance took: each address once, with the last thing it said. */
    UnavailableException unreachable(List<Miss> misses) {
        Map<String, String> last = new LinkedHashMap<>();
        for (Miss m : misses) {
            last.remove(m.address.name());
            last.put(m.address.name(), m.what);
        }
        StringBuilder b = new StringBuilder("the service could not be reached");
        if (!last.isEmpty()) {
            b.append(" (");
            String sep = "";
            for (Map.Entry<String, String> e : last.entrySet()) {
                b.append(sep).append(e.getKey()).append(": ").append(e.getValue());
                sep = "; ";
            }
            b.append(')');
        }
        return new UnavailableException(b.toString(), "unavailable", "");
    }

    /** Whether e means the request never reached the instance. */
    static boolean unreached(Throwable e) {
        return e instanceof ConnectException || e instanceof HttpConnectTimeoutException || e instanceof SSLHandshakeException;
    }

    /** One unary call, on the instances in turn as the top of this file says. */
    Map<String, Object> unary(String service, String method, Map<String, Object> body, Duration callTimeout) {
        Duration t = callTimeout == null ? timeout : callTimeout;
        byte[] data = Json.write(body).getBytes(StandardCharsets.UTF_8);
        List<Miss> misses = new ArrayList<>();
        for (int i : order(-1)) {
            Address a = addresses.get(i);
            HttpRequest req = request(i, service, method, false)
                    .header("Connect-Timeout-Ms", Long.toString(Math.max(1, t.toMillis())))
                    .timeout(t)
                    .POST(HttpRequest.BodyPublishers.ofByteArray(data))
                    .build();
            HttpResponse<byte[]> resp;
            try {
                resp = http.send(req, HttpResponse.BodyHandlers.ofByteArray());
            } catch (IOException e) {
                skip(i);
                if (unreached(e)) {
                    misses.add(new Miss(a, describe(e)));
                    continue;
                }
                throw new UnavailableException(service + " " + method + " on " + a.name()
                        + ": the connection broke, the outcome is unknown: " + describe(e), "unavailable", "");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new TurnstileException(service + " " + method + ": interrupted", "canceled", "");
            }
            if (resp.statusCode() == 200) {
                use(i);
                try {
                    return Json.parseObject(new String(resp.body(), StandardCharsets.UTF_8));
                } catch (IllegalArgumentException e) {
                    throw new TurnstileException(a.name() + ": a malformed answer to " + method, "internal", "");
                }
            }
            TurnstileException err = errorOf(resp.statusCode(), resp.headers().firstValue("Content-Type").orElse(""),
                    resp.headers().firstValue("Turnstile-Reason").orElse(""), resp.body(), a);
            if (err.reason().equals("DRAINING")) {
                skip(i);
                misses.add(new Miss(a, err.getMessage()));
                continue;
            }
            throw err;
        }
        throw unreachable(misses);
    }

    // The error of an answer that is not 200.
    private static TurnstileException errorOf(int status, String contentType, String reasonHeader, byte[] body, Address a) {
        String reason = Errors.reasonOf(reasonHeader);
        String ctype = contentType.split(";")[0].strip();
        if (ctype.equals("application/json")) {
            try {
                return Errors.fromObject(Json.parseObject(new String(body, StandardCharsets.UTF_8)), reason, a.name());
            } catch (IllegalArgumentException e) {
                // below
            }
        }
        return Errors.fromService(Errors.codeOfHttpStatus(status),
                "HTTP " + status + " from " + a.name() + ", not an answer of the turnstile service", reason);
    }

    /**
     * A stream on instance i, once its headers are in, waiting up to
     * connectWait for them. IOException if it could not be reached (or did
     * not answer in time); TurnstileException if it answered with something
     * that is not a stream.
     */
    FrameStream openStream(int i, String service, String method, Map<String, Object> body, Duration connectWait)
            throws IOException, InterruptedException {
        Address a = addresses.get(i);
        HttpRequest req = request(i, service, method, true)
                .POST(HttpRequest.BodyPublishers.ofByteArray(Wire.frame(body)))
                .build();
        FrameStream st = new FrameStream(i, a);
        byte[][] errorBody = new byte[1][];
        HttpResponse.BodyHandler<FrameStream> handler = info -> {
            if (info.statusCode() == 200) {
                return st;
            }
            return HttpResponse.BodySubscribers.mapping(HttpResponse.BodySubscribers.ofByteArray(), b -> {
                errorBody[0] = b;
                return null;
            });
        };
        CompletableFuture<HttpResponse<FrameStream>> f = http.sendAsync(req, handler);
        HttpResponse<FrameStream> resp;
        try {
            resp = f.get(Math.max(1, connectWait.toNanos()), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            st.close();
            throw new HttpTimeoutException("no answer within " + connectWait.toMillis() + " ms");
        } catch (InterruptedException e) {
            f.cancel(true);
            st.close();
            throw e;
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof IOException) {
                throw (IOException) c;
            }
            throw new IOException(describe(c), c);
        }
        if (resp.statusCode() != 200) {
            throw errorOf(resp.statusCode(), resp.headers().firstValue("Content-Type").orElse(""),
                    resp.headers().firstValue("Turnstile-Reason").orElse(""),
                    errorBody[0] == null ? new byte[0] : errorBody[0], a);
        }
        return st;
    }

    /** What went wrong, in a few words that never include a request's headers. */
    static String describe(Throwable e) {
        if (e instanceof TurnstileException) {
            return e.getMessage();
        }
        if (e instanceof ConnectException) {
            return "connection refused";
        }
        if (e instanceof HttpTimeoutException) {
            return "timed out";
        }
        if (e instanceof SSLException) {
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            return "TLS: " + (root.getMessage() != null ? root.getMessage() : root.getClass().getSimpleName());
        }
        if (e != null && e.getMessage() != null && !e.getMessage().isEmpty()) {
            return e.getMessage();
        }
        return e == null ? "unknown" : e.getClass().getSimpleName();
    }
}
