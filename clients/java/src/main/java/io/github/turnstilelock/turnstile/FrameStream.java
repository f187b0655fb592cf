package io.github.turnstilelock.turnstile;

import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Flow;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One server stream over Connect's protocol: the response body, cut into its
 * enveloped messages as the bytes arrive, and read by one thread with
 * {@link #next}. Closing it cancels the body, which closes its HTTP/1.1
 * connection: the service sees the stream end at once.
 */
final class FrameStream implements HttpResponse.BodySubscriber<FrameStream> {
    /** The stream's connection broke, or its body ended without Connect's end message. */
    static final class Broken extends UnavailableException {
        private static final long serialVersionUID = 1L;

        Broken(String message) {
            super(message, "unavailable", "");
        }
    }

    /** Nothing arrived within the time the reader allowed. */
    static final class Timeout extends Exception {
        private static final long serialVersionUID = 1L;
    }

    // What the reader takes: a message (Map), or the end (Ended).
    private static final class Ended {
        final TurnstileException error; // null: a clean end

        Ended(TurnstileException error) {
            this.error = error;
        }
    }

    final int index;
    final Address address;
    private final BlockingQueue<Object> events = new LinkedBlockingQueue<>();
    private final Object mu = new Object();
    private Flow.Subscription subscription;
    private boolean done; // the end was queued: nothing more is
    private byte[] buf = new byte[0];
    private Object last; // the end, once taken: every later next() gives it again

    FrameStream(int index, Address address) {
        this.index = index;
        this.address = address;
    }

    @Override
    public CompletionStage<FrameStream> getBody() {
        // The stream is the body: available once the headers are in.
        return CompletableFuture.completedFuture(this);
    }

    @Override
    public void onSubscribe(Flow.Subscription s) {
        boolean cancel;
        synchronized (mu) {
            subscription = s;
            cancel = done;
        }
        if (cancel) {
            s.cancel();
        } else {
            s.request(1);
        }
    }

    @Override
    public void onNext(List<ByteBuffer> items) {
        Flow.Subscription s;
        synchronized (mu) {
            if (done) {
                return;
            }
            int n = buf.length;
            for (ByteBuffer b : items) {
                n += b.remaining();
            }
            byte[] all = new byte[n];
            System.arraycopy(buf, 0, all, 0, buf.length);
            int at = buf.length;
            for (ByteBuffer b : items) {
                int r = b.remaining();
                b.get(all, at, r);
                at += r;
            }
            buf = all;
            cut();
            s = subscription;
        }
        if (s != null) {
            s.request(1);
        }
    }

    // cut takes the whole messages off buf (under mu).
    private void cut() {
        int at = 0;
        while (!done && buf.length - at >= 5) {
            int flags = buf[at] & 0xff;
            long len = ByteBuffer.wrap(buf, at + 1, 4).getInt() & 0xffffffffL;
            if (len > Wire.MAX_MESSAGE) {
                end(new Broken("a message of " + len + " bytes from " + address.name() + ": the stream is out of step"));
                break;
            }
            if (buf.length - at - 5 < len) {
                break;
            }
            String text = new String(buf, at + 5, (int) len, StandardCharsets.UTF_8);
            at += 5 + (int) len;
            if ((flags & Wire.FLAG_COMPRESSED) != 0) {
                end(new Broken("a compressed message from " + address.name() + ", which was not asked for"));
                break;
            }
            Map<String, Object> m;
            try {
                m = text.isEmpty() ? Map.of() : Json.parseObject(text);
            } catch (IllegalArgumentException e) {
                end(new Broken("a malformed message from " + address.name()));
                break;
            }
            if ((flags & Wire.FLAG_END_STREAM) != 0) {
                end(endError(m));
                break;
            }
            events.add(m);
        }
        byte[] rest = new byte[buf.length - at];
        System.arraycopy(buf, at, rest, 0, rest.length);
        buf = rest;
    }

    // The error of an end-of-stream message, null for a clean end.
    private TurnstileException endError(Map<String, Object> m) {
        Map<String, Object> err = Wire.obj(m, "error");
        if (err == null) {
            return null;
        }
        String reason = "";
        Map<String, Object> meta = Wire.obj(m, "metadata");
        if (meta != null) {
            for (Map.Entry<String, Object> e : meta.entrySet()) {
                if (e.getKey().equalsIgnoreCase("turnstile-reason") && e.getValue() instanceof List
                        && !((List<?>) e.getValue()).isEmpty() && ((List<?>) e.getValue()).get(0) instanceof String) {
                    reason = Errors.reasonOf((String) ((List<?>) e.getValue()).get(0));
                }
            }
        }
        return Errors.fromObject(err, reason, address.name());
    }

    // end queues the stream's end once (under mu).
    private void end(TurnstileException error) {
        if (!done) {
            done = true;
            events.add(new Ended(error));
            if (subscription != null && error instanceof Broken) {
                subscription.cancel();
            }
        }
    }

    @Override
    public void onError(Throwable t) {
        synchronized (mu) {
            end(new Broken("the stream from " + address.name() + " broke: " + Transport.describe(t)));
        }
    }

    @Override
    public void onComplete() {
        synchronized (mu) {
            end(new Broken("the stream from " + address.name() + " ended before its end message"));
        }
    }

    /**
     * The next message, waiting up to timeoutNanos (negative: as long as it
     * takes); null at a clean end. Throws the stream's error, Broken, or
     * Timeout.
     */
    Map<String, Object> next(long timeoutNanos) throws Timeout, InterruptedException {
        Object e = last;
        if (e == null) {
            e = timeoutNanos < 0 ? events.take() : events.poll(timeoutNanos, TimeUnit.NANOSECONDS);
        }
        if (e == null) {
            throw new Timeout();
        }
        if (e instanceof Ended) {
            last = e;
            if (((Ended) e).error != null) {
                throw ((Ended) e).error;
            }
            return null;
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> m = (Map<String, Object>) e;
        return m;
    }

    /** Cancels the body, which closes the connection; a reader waiting in next() gets Broken. */
    void close() {
        Flow.Subscription s;
        synchronized (mu) {
            end(new Broken("the stream from " + address.name() + " was closed"));
            s = subscription;
        }
        if (s != null) {
            s.cancel();
        }
    }
}
