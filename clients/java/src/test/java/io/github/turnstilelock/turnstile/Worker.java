package io.github.turnstilelock.turnstile;

import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;

/**
 * Worker processes of the service tests (Support.worker starts them).
 *
 * <pre>
 * Worker counter URL KEY COUNTER_FILE N LOG   N sections, each adding 1 to COUNTER_FILE
 * Worker hold URL KEY TTL_MS                  hold KEY, say "held TOKEN", then sleep
 * Worker campaign URL NAME VALUE DIR          lead once, then resign
 * </pre>
 *
 * The bearer token comes from TURNSTILE_TEST_ADMIN, never from the arguments.
 */
public final class Worker {
    private Worker() {
    }

    public static void main(String[] a) throws Exception {
        Client c = Client.builder(a[1]).token(Support.admin()).build();
        switch (a[0]) {
            case "counter":
                counter(c, a[2], Path.of(a[3]), Integer.parseInt(a[4]), Path.of(a[5]));
                break;
            case "hold":
                Lease lease = c.acquire(a[2], Duration.ofMillis(Long.parseLong(a[3])), Duration.ofSeconds(30));
                System.out.println("held " + lease.token());
                System.out.flush();
                Thread.sleep(Long.MAX_VALUE);
                break;
            case "campaign":
                campaign(c, a[2], a[3], Path.of(a[4]));
                break;
            default:
                throw new IllegalArgumentException(a[0]);
        }
        System.exit(0);
    }

    private static void counter(Client c, String key, Path counter, int n, Path log) throws IOException {
        try (Writer w = Files.newBufferedWriter(log, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND)) {
            for (int i = 0; i < n; i++) {
                try (Lease lease = c.acquire(key, Duration.ofSeconds(10), Duration.ofSeconds(120))) {
                    String text = Files.readString(counter).strip();
                    long value = text.isEmpty() ? 0 : Long.parseLong(text);
                    Files.writeString(counter, Long.toString(value + 1));
                    // The section's place (the value it read) and its token.
                    w.write(value + " " + lease.token() + "\n");
                    w.flush();
                }
            }
        }
    }

    private static void campaign(Client c, String name, String value, Path dir) throws Exception {
        Election e = c.election(name);
        try (Leadership lead = e.campaign(value, Duration.ofSeconds(5), Duration.ofSeconds(120))) {
            Path marker = dir.resolve("leader");
            try {
                // CREATE_NEW: a second leader at the same time finds the marker there.
                Files.writeString(marker, value, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
            } catch (FileAlreadyExistsException x) {
                System.out.println("two leaders: " + value + " found " + Files.readString(marker));
                System.exit(2);
            }
            Files.writeString(dir.resolve("terms"), lead.term() + "\n", StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            Leader now = e.leader();
            System.out.println("leader " + value + " term " + lead.term() + " sees " + now.value() + " term " + now.term());
            System.out.flush();
            Thread.sleep(300);
            Files.delete(marker);
            lead.check();
        }
    }
}
