package io.github.turnstilelock.turnstile;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Opening a held stream (Hold, Campaign, or Hold resuming a lease) on the
 * service's instances in turn, until one grants it.
 */
final class Held {
    private Held() {
    }

    /** The grants a held stream's first messages may carry: Hold's and Campaign's. */
    private static final String[] GRANTS = {"granted", "elected"};

    /** Margin over a request's wait before its stream is given up as silent: the service ends the wait itself, and says so. */
    static final long WAIT_MARGIN_NANOS = 5_000_000_000L;

    /** A held stream and its grant. */
    static final class Grant {
        final FrameStream stream;
        final Map<String, Object> grant;

        Grant(FrameStream stream, Map<String, Object> grant) {
            this.stream = stream;
            this.grant = grant;
        }
    }

    /**
     * The stream and its grant. wait bounds the wait the service makes (null:
     * the service's own bound); with retry, instances that cannot be reached
     * are tried again until the wait is over; deadline (System.nanoTime, or
     * null) bounds everything, for a resume within a lease's validity.
     */
    static Grant open(Transport t, String service, String method, Map<String, Object> body, Duration wait,
                      boolean retry, int avoid, Long deadline) {
        if (wait != null) {
            long end = System.nanoTime() + wait.toNanos();
            deadline = deadline == null ? end : Math.min(deadline, end);
        }
        List<Transport.Miss> misses = new ArrayList<>();
        long pause = 50_000_000L;
        try {
            while (true) {
                for (int i : t.order(avoid)) {
                    Long left = deadline == null ? null : deadline - System.nanoTime();
                    if (left != null && left <= 0) {
                        break;
                    }
                    Duration ct = left == null ? t.connectTimeout : Duration.ofNanos(Math.min(t.connectTimeout.toNanos(), left));
                    FrameStream st;
                    try {
                        st = t.openStream(i, service, method, body, ct);
                    } catch (IOException e) {
                        t.skip(i);
                        misses.add(new Transport.Miss(t.addresses.get(i), Transport.describe(e)));
                        continue;
                    } catch (TurnstileException e) {
                        if (e.reason().equals("DRAINING")) {
                            t.skip(i);
                            misses.add(new Transport.Miss(t.addresses.get(i), e.getMessage()));
                            continue;
                        }
                        throw e;
                    }
                    try {
                        long limit = left == null ? -1 : left + WAIT_MARGIN_NANOS;
                        long until = System.nanoTime() + limit;
                        while (true) {
                            Map<String, Object> m = st.next(limit < 0 ? -1 : Math.max(0, until - System.nanoTime()));
                            if (m == null) {
                                throw new FrameStream.Broken(st.address.name() + " ended its stream without an answer");
                            }
                            for (String g : GRANTS) {
                                Map<String, Object> grant = Wire.obj(m, g);
                                if (grant != null) {
                                    t.use(i);
                                    return new Grant(st, grant);
                                }
                            }
                        }
                    } catch (FrameStream.Timeout e) {
                        st.close();
                        throw new UnavailableException(st.address.name() + " did not answer within the wait", "unavailable", "");
                    } catch (FrameStream.Broken e) {
                        st.close();
                        t.skip(i);
                        misses.add(new Transport.Miss(t.addresses.get(i), e.getMessage()));
                    } catch (TurnstileException e) {
                        st.close();
                        if (!e.reason().equals("DRAINING")) {
                            throw e;
                        }
                        t.skip(i);
                        misses.add(new Transport.Miss(t.addresses.get(i), e.getMessage()));
                    } catch (InterruptedException | RuntimeException | Error e) {
                        st.close();
                        throw e;
                    }
                }
                long left = deadline == null ? 0 : deadline - System.nanoTime();
                if (!retry || deadline == null || left <= 0) {
                    throw t.unreachable(misses);
                }
                Thread.sleep(Math.max(1, Math.min(pause, left) / 1_000_000L));
                pause = Math.min(pause * 2, 1_000_000_000L);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TurnstileException(service + " " + method + ": interrupted", "canceled", "");
        }
    }
}
