package io.github.turnstilelock.turnstile;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What the service tests share: the servers clients/test.sh started, extra
 * instances of the service, worker processes.
 */
final class Support {
    private Support() {
    }

    private static final AtomicInteger SEQ = new AtomicInteger();

    /** An environment variable clients/test.sh sets; a test without it fails (it is no skip). */
    static String env(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalStateException(name + " is not set: run clients/test.sh, which starts redis-server and turnstile serve");
        }
        return v;
    }

    static String url() {
        return env("TURNSTILE_TEST_URL");
    }

    static String admin() {
        return env("TURNSTILE_TEST_ADMIN");
    }

    /** The secret part of a token NAME.SECRET. */
    static String secretOf(String token) {
        return token.substring(token.indexOf('.') + 1);
    }

    /** A client of the test instance with the admin token. */
    static Client client() {
        return Client.builder(url()).token(admin()).build();
    }

    /** A key no other test or run uses. */
    static String key(String name) {
        return "java:" + name + ":" + ProcessHandle.current().pid() + ":" + (System.currentTimeMillis() % 100_000_000L) + ":"
                + SEQ.incrementAndGet();
    }

    /** An extra "turnstile serve" over the test Redis, for tests that stop it. */
    static final class Instance implements AutoCloseable {
        final Process proc;
        final String url;
        private final StringBuilder log = new StringBuilder();

        Instance() throws Exception {
            proc = new ProcessBuilder(env("TURNSTILE_BIN"), "serve", "--backend", env("TURNSTILE_TEST_REDIS"), "--listen",
                    "127.0.0.1:0", "--tokens", env("TURNSTILE_TEST_TOKENS_FILE"), "--drain-timeout", "2s")
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.PIPE).start();
            CompletableFuture<String> found = new CompletableFuture<>();
            Pattern p = Pattern.compile(" on (http://127\\.0\\.0\\.1:\\d+)");
            Thread t = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String line; (line = r.readLine()) != null; ) {
                        synchronized (log) {
                            log.append(line).append('\n');
                        }
                        Matcher m = p.matcher(line);
                        if (m.find()) {
                            found.complete(m.group(1));
                        }
                    }
                } catch (IOException e) {
                    // the process ended
                }
                found.complete("");
            });
            t.setDaemon(true);
            t.start();
            String u = found.get(20, TimeUnit.SECONDS);
            if (u.isEmpty()) {
                proc.destroyForcibly();
                synchronized (log) {
                    throw new IllegalStateException("turnstile serve did not start: " + log);
                }
            }
            url = u;
        }

        /** Stops it with SIGTERM (it drains) or SIGKILL. */
        void stop(boolean kill) {
            if (proc.isAlive()) {
                if (kill) {
                    proc.destroyForcibly();
                } else {
                    proc.destroy();
                }
            }
            try {
                proc.waitFor(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        @Override
        public void close() {
            stop(true);
        }
    }

    /** A worker process (Worker.main with args) of this JVM's class path, its stdout a pipe of lines. */
    static Process worker(String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("-XX:TieredStopAtLevel=1");
        cmd.add("-XX:+UseSerialGC");
        cmd.add("-Xshare:auto");
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(Worker.class.getName());
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    /** The worker's next line, or a failure when it says nothing in time. */
    static String readLine(Process p, BufferedReader r, long seconds) throws Exception {
        CompletableFuture<String> line = CompletableFuture.supplyAsync(() -> {
            try {
                return r.readLine();
            } catch (IOException e) {
                return null;
            }
        });
        String s;
        try {
            s = line.get(seconds, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            s = null;
        }
        if (s == null) {
            p.destroyForcibly();
            throw new AssertionError("worker " + p.info().arguments().map(List::of).orElse(List.of()) + " said nothing within "
                    + seconds + " s");
        }
        return s.strip();
    }

    static BufferedReader lines(Process p) {
        return new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    }

    /** Kills p if it still runs. */
    static void end(Process p) throws InterruptedException {
        if (p.isAlive()) {
            p.destroyForcibly();
        }
        p.waitFor(30, TimeUnit.SECONDS);
    }
}
