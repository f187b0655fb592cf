package io.github.turnstilelock.turnstile;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An election: one leader at a time, whose term is its lease's fencing
 * token. {@link #campaign} to lead, {@link #leader()} to see who does.
 *
 * <pre>{@code
 * try (Leadership lead = client.election("scheduler").campaign("host-1")) {
 *     runScheduler(lead.term());      // until lead.lost() completes
 * }
 * }</pre>
 */
public final class Election {
    private final Client client;
    private final String name;

    Election(Client client, String name) {
        this.client = client;
        this.name = name;
    }

    /**
     * The election's name: the key of its lock.
     *
     * @return the name
     */
    public String name() {
        return name;
    }

    /**
     * Waits as long as it takes (up to the service's --max-wait) until this
     * candidate leads, then holds the leadership, renewed by the service.
     *
     * @param value what observers see as the leader (an address, a host name;
     *     at most 128 bytes); null: the instance's id
     * @return the leadership: close it to resign
     * @throws NotAcquiredException if the wait ended first
     */
    public Leadership campaign(String value) {
        return campaign(value, null, null);
    }

    /**
     * Waits up to wait until this candidate leads, then holds the leadership.
     *
     * @param value what observers see as the leader; null: the instance's id
     * @param ttl how long the election's lock outlives a leader that vanished;
     *     null: the service's --ttl
     * @param wait how long to wait; null: the service's --max-wait
     * @return the leadership: close it to resign
     * @throws NotAcquiredException if the wait ended first
     * @throws UnavailableException if no instance answered within the wait
     */
    public Leadership campaign(String value, Duration ttl, Duration wait) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("name", name);
        if (value != null) {
            body.put("value", value);
        }
        if (ttl != null) {
            body.put("ttl", Wire.duration(Wire.checkTtl(ttl)));
        }
        if (wait != null) {
            body.put("wait", Wire.duration(Wire.checkWait(wait)));
        }
        Held.Grant g = Held.open(client.transport(), "Elections", "Campaign", body, wait, wait != null, -1, null);
        Leadership lead;
        try {
            Map<String, Object> h = Wire.obj(g.grant, "lease");
            String owner = h == null ? "" : Wire.str(h, "owner");
            String shown = value != null ? value : owner.contains("/") ? owner.substring(0, owner.lastIndexOf('/')) : owner;
            lead = new Leadership(client.transport(), g, ttl, shown);
        } catch (RuntimeException e) {
            g.stream.close();
            throw e;
        }
        lead.start();
        return lead;
    }

    /**
     * Who leads now (read role).
     *
     * @return the leader, or one with elected false
     */
    public Leader leader() {
        Map<String, Object> m = client.transport().unary("Elections", "Leader", Map.of("name", name), null);
        Map<String, Object> l = Wire.obj(m, "leader");
        if (l == null) {
            return new Leader(false, "", 0, "");
        }
        return new Leader(Wire.bool(l, "elected"), Wire.str(l, "value"), Wire.uint(l, "term"), Wire.str(l, "owner"));
    }

    @Override
    public String toString() {
        return "Election{" + name + "}";
    }
}
