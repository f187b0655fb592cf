package io.github.turnstilelock.turnstile;

import java.io.BufferedReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

/** Elections: one leader at a time, terms that grow. */
final class ElectionTest {
    private final Client c = Support.client();

    void testOneLeaderAtATimeOverThreeTerms() throws Exception {
        String name = Support.key("election");
        Path dir = Files.createTempDirectory("turnstile-java-election");
        List<Process> ws = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                ws.add(Support.worker("campaign", Support.url(), name, "candidate-" + i, dir.toString()));
            }
            List<String> lines = new ArrayList<>();
            for (Process w : ws) {
                BufferedReader r = Support.lines(w);
                lines.add(Support.readLine(w, r, 120));
            }
            for (Process w : ws) {
                Check.isTrue(w.waitFor(60, TimeUnit.SECONDS), "a candidate did not end");
                Check.equal(0, w.exitValue(), "a candidate's exit status (two leaders at once?)");
            }
            Check.isTrue(!Files.exists(dir.resolve("leader")), "the last leader's marker is gone");
            List<Long> inOrder = new ArrayList<>();
            for (String t : Files.readAllLines(dir.resolve("terms"))) {
                inOrder.add(Long.parseLong(t.strip()));
            }
            TreeSet<String> values = new TreeSet<>();
            TreeSet<Long> terms = new TreeSet<>();
            for (String line : lines) {
                String[] f = line.split(" "); // leader VALUE term N sees VALUE term N
                Check.equal(f[1], f[5], "while " + f[1] + " led, Leader said");
                Check.equal(f[3], f[7], "the term Leader said");
                values.add(f[1]);
                terms.add(Long.parseLong(f[3]));
            }
            Check.equal(List.of("candidate-0", "candidate-1", "candidate-2"), new ArrayList<>(values), "leaders");
            Check.equal(new ArrayList<>(terms), new ArrayList<>(new TreeSet<>(inOrder)), "terms");
            for (int i = 1; i < inOrder.size(); i++) {
                Check.isTrue(inOrder.get(i) > inOrder.get(i - 1), "terms not strictly increasing: " + inOrder);
            }
            Check.equal(3, inOrder.size(), "terms");
            Check.isTrue(!c.election(name).leader().elected(), "nobody leads after the last resigned");
        } finally {
            for (Process w : ws) {
                Support.end(w);
            }
            try (var files = Files.list(dir)) {
                for (Path p : (Iterable<Path>) files::iterator) {
                    Files.delete(p);
                }
            }
            Files.delete(dir);
        }
    }

    void testCampaignInProcess() {
        Election e = c.election(Support.key("inproc"));
        Check.isTrue(!e.leader().elected(), "nobody leads yet");
        try (Leadership lead = e.campaign("me", Duration.ofSeconds(5), Duration.ofSeconds(5))) {
            Check.equal("me", lead.value(), "value");
            Leader now = e.leader();
            Check.isTrue(now.elected(), "elected");
            Check.equal("me", now.value(), "the leader's value");
            Check.equal(lead.term(), now.term(), "term");
            Check.raises(NotAcquiredException.class, () -> e.campaign("other", Duration.ofSeconds(5), Duration.ofMillis(300)));
        }
        Check.isTrue(!e.leader().elected(), "resigned");
    }
}
