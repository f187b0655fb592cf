import io.github.turnstilelock.turnstile.Client;
import io.github.turnstilelock.turnstile.Lease;
import io.github.turnstilelock.turnstile.LeaseLostException;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Writer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The GC-pause incident, replayed with turnstile's Java client.
 *
 * <p>Worker 1 holds the lock on order:42 and is paused (SIGSTOP, as a
 * stop-the-world GC pause would pause a JVM) just before a write. The
 * service renews a held lease for as long as its stream is open, so a
 * paused process keeps its lock while its connection and the instance
 * serving it live; its lease runs out during the pause when that renewal
 * stops as well. Here the instance renewing worker 1's lease dies during the
 * pause (as in a crash or a partition), the lease runs out within its TTL,
 * and worker 2 takes the lock with a greater fencing token and writes.
 * Worker 1 wakes up and writes with its old token: the storage checks
 * fencing tokens and refuses the late write.
 *
 * <p>The storage is examples/fenced-register: turnstile's fence package
 * (fence.Memory) behind a small HTTP endpoint.
 *
 * <pre>
 * java -cp turnstile-client.jar:example-classes GcPause --turnstile ./turnstile \
 *     --fenced-register ./fenced-register --redis redis://127.0.0.1:6379
 * </pre>
 *
 * It starts two instances of "turnstile serve" over that Redis and the
 * fenced register, on free loopback ports, and stops them when it is done.
 * Exit status 0 when the late write was refused.
 */
public final class GcPause {
    private static final String KEY = "order:42";
    private static final Duration TTL = Duration.ofSeconds(2);
    private static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    private GcPause() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 3 && args[0].equals("worker")) {
            worker1(args[1], args[2]);
            return;
        }
        String turnstile = "turnstile";
        String register = "fenced-register";
        String redis = "redis://127.0.0.1:6379";
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--turnstile": turnstile = args[i + 1]; break;
                case "--fenced-register": register = args[i + 1]; break;
                case "--redis": redis = args[i + 1]; break;
                default:
                    System.err.println("usage: GcPause [--turnstile BIN] [--fenced-register BIN] [--redis URL]");
                    System.exit(64);
            }
        }
        List<Process> procs = new ArrayList<>();
        int status;
        try {
            List<String> urls = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                Process p = new ProcessBuilder(turnstile, "serve", "--backend", redis, "--listen", "127.0.0.1:0")
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
                procs.add(p);
                urls.add(urlOf(p, p.getErrorStream(), " on (http://127\\.0\\.0\\.1:\\d+)", "turnstile serve"));
            }
            Process reg = new ProcessBuilder(register, "--listen", "127.0.0.1:0")
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            procs.add(reg);
            String registerUrl = urlOf(reg, reg.getInputStream(), "listening on (http://\\S+)", "fenced-register");
            System.out.println("two instances of turnstile serve over " + redis + "; the fenced register at " + registerUrl);
            status = incident(procs.get(0), urls, registerUrl);
        } finally {
            for (Process p : procs) {
                p.destroy();
                p.waitFor(10, TimeUnit.SECONDS);
            }
        }
        System.exit(status);
    }

    /** Worker 1, a process of its own: takes the lock, writes, says so, and writes again when told (after its pause). */
    private static void worker1(String services, String register) throws Exception {
        Client client = Client.builder(services.split(",")).build();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (Lease lease = client.acquire(KEY, TTL, Duration.ofSeconds(10))) {
            HttpResponse<String> w = write(register, lease.token(), "paid (worker 1)");
            System.out.println("held " + lease.token() + " " + w.statusCode());
            System.out.flush();
            in.readLine(); // the pause lands here, just before the write
            w = write(register, lease.token(), "shipped (worker 1, late)");
            System.out.println("wrote " + w.statusCode() + " " + field(w.body(), "error", "ok"));
            System.out.flush();
        } catch (LeaseLostException e) {
            System.out.println("lost " + e.getMessage());
        }
    }

    private static int incident(Process instance1, List<String> urls, String register) throws Exception {
        // Worker 1 calls instance 1 first, instance 2 if it cannot.
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process w1 = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), "GcPause", "worker",
                String.join(",", urls), register).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        boolean refused = false;
        long token2;
        try {
            BufferedReader out = new BufferedReader(new InputStreamReader(w1.getInputStream(), StandardCharsets.UTF_8));
            String[] held = String.valueOf(out.readLine()).split(" ");
            if (!held[0].equals("held")) {
                System.out.println("worker 1 did not take the lock: " + String.join(" ", held));
                return 1;
            }
            long token1 = Long.parseLong(held[1]);
            System.out.println("worker 1: holds " + KEY + " with fencing token " + token1 + "; its write: HTTP " + held[2]);

            signal("STOP", w1);
            long paused = System.nanoTime();
            System.out.println("worker 1: paused (SIGSTOP), as a stop-the-world GC pause would pause it, before its next write");
            instance1.destroyForcibly();
            instance1.waitFor();
            System.out.println("instance 1, which renews worker 1's lease, dies: the lease runs out within its "
                    + TTL.toSeconds() + " s TTL");

            try (Lease lease = new Client(urls.get(1)).acquire(KEY, TTL, Duration.ofSeconds(15))) {
                HttpResponse<String> w = write(register, lease.token(), "refunded (worker 2)");
                System.out.printf("worker 2: holds %s with fencing token %d, %.1f s into the pause; its write: HTTP %d%n",
                        KEY, lease.token(), (System.nanoTime() - paused) / 1e9, w.statusCode());
                token2 = lease.token();
            }

            try (Writer in = new java.io.OutputStreamWriter(w1.getOutputStream(), StandardCharsets.UTF_8)) {
                in.write("go\n");
            }
            signal("CONT", w1);
            System.out.printf("worker 1: resumed (SIGCONT) after %.1f s; it writes with token %d%n",
                    (System.nanoTime() - paused) / 1e9, token1);
            for (String line; (line = out.readLine()) != null; ) {
                String[] f = line.split(" ", 3);
                if (f[0].equals("wrote")) {
                    refused = f[1].equals("409");
                    System.out.println("worker 1: its late write: HTTP " + f[1] + ", " + (f.length > 2 ? f[2] : ""));
                } else if (f[0].equals("lost")) {
                    System.out.println("worker 1: leaving its try block: LeaseLostException: " + line.substring(5));
                }
            }
            w1.waitFor(30, TimeUnit.SECONDS);
        } finally {
            w1.destroyForcibly();
        }
        String body = HTTP.send(HttpRequest.newBuilder(URI.create(register + "/read?resource=" + KEY)).build(),
                HttpResponse.BodyHandlers.ofString()).body();
        String value = field(body, "value", "");
        String token = field(body, "token", "");
        System.out.println("the register holds '" + value + "', written with token " + token);
        if (refused && token.equals(Long.toString(token2))) {
            System.out.println("the late write was refused: the fencing token kept worker 2's write");
            return 0;
        }
        System.out.println("FAILED: the late write was not refused");
        return 1;
    }

    private static HttpResponse<String> write(String register, long token, String value) throws IOException, InterruptedException {
        String body = "{\"resource\":\"" + KEY + "\",\"token\":" + Long.toUnsignedString(token) + ",\"value\":\"" + value + "\"}";
        return HTTP.send(HttpRequest.newBuilder(URI.create(register + "/write"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    /** A string or number field of a small flat JSON object (the register's answers). */
    private static String field(String json, String name, String otherwise) {
        Matcher m = Pattern.compile("\"" + name + "\":(?:\"((?:[^\"\\\\]|\\\\.)*)\"|(\\d+))").matcher(json);
        if (!m.find()) {
            return otherwise;
        }
        return m.group(1) != null ? m.group(1).replace("\\\"", "\"") : m.group(2);
    }

    private static void signal(String sig, Process p) throws IOException, InterruptedException {
        int rc = new ProcessBuilder("kill", "-" + sig, Long.toString(p.pid())).inheritIO().start().waitFor();
        if (rc != 0) {
            throw new IOException("kill -" + sig + " failed");
        }
    }

    /** The URL a server process says it serves at (on the stream it says it on). */
    private static String urlOf(Process p, java.io.InputStream stream, String pattern, String what) throws Exception {
        Pattern re = Pattern.compile(pattern);
        CompletableFuture<String> found = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(stream, StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    Matcher m = re.matcher(line);
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
        String url = found.get(30, TimeUnit.SECONDS);
        if (url.isEmpty()) {
            p.destroyForcibly();
            throw new IllegalStateException(what + " did not start");
        }
        return url;
    }
}
