package io.github.turnstilelock.turnstile;

import java.net.URI;
import java.util.ArrayList;
import java.util.List;

/**
 * One instance of the service: scheme (http or https), host, port, and a
 * path prefix before /turnstile.v1... ("" for none).
 */
record Address(String scheme, String host, int port, String prefix) {
    static final int DEFAULT_PORT = 7070;

    /** host:port, as errors name an instance. */
    String name() {
        return (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
    }

    /** The URI of a method of a service. */
    URI uri(String service, String method) {
        return URI.create(scheme + "://" + name() + prefix + "/turnstile.v1." + service + "/" + method);
    }

    @Override
    public String toString() {
        return scheme + "://" + name() + prefix;
    }

    /**
     * The instances of urls: each a URL of one instance or of several
     * ("http://h1:7070,h2:7070"). Errors never quote user information.
     */
    static List<Address> parse(List<String> urls) {
        if (urls == null || urls.isEmpty()) {
            throw new IllegalArgumentException("turnstile: no service address: want a URL such as http://127.0.0.1:7070");
        }
        List<Address> out = new ArrayList<>();
        for (String url : urls) {
            if (url == null) {
                throw new NullPointerException("service address");
            }
            out.addAll(parseOne(url.strip()));
        }
        return List.copyOf(out);
    }

    private static List<Address> parseOne(String url) {
        int sep = url.indexOf("://");
        if (sep < 0) {
            throw new IllegalArgumentException("turnstile: service address " + clip(url) + ": want http://host:port or https://host:port");
        }
        String scheme = url.substring(0, sep).toLowerCase(java.util.Locale.ROOT);
        if (!scheme.equals("http") && !scheme.equals("https")) {
            throw new IllegalArgumentException("turnstile: service address scheme " + clip(scheme) + ": want http or https");
        }
        String rest = url.substring(sep + 3);
        int slash = rest.indexOf('/');
        String netloc = slash < 0 ? rest : rest.substring(0, slash);
        String path = slash < 0 ? "" : rest.substring(slash);
        if (netloc.contains("@")) {
            throw new IllegalArgumentException(
                    "turnstile: a service address must not carry user information; give the bearer token to Client.builder().token()");
        }
        if (netloc.contains("?") || netloc.contains("#") || path.contains("?") || path.contains("#")) {
            throw new IllegalArgumentException("turnstile: service address " + scheme + "://...: no query or fragment, please");
        }
        String trimmed = path.replaceAll("^/+|/+$", "");
        String prefix = trimmed.isEmpty() ? "" : "/" + trimmed;
        if (!prefix.isEmpty()) {
            try {
                URI.create("http://x" + prefix);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("turnstile: service address " + scheme + "://...: a malformed path");
            }
        }
        List<Address> out = new ArrayList<>();
        for (String h : netloc.split(",", -1)) {
            h = h.strip();
            if (h.isEmpty()) {
                throw new IllegalArgumentException("turnstile: service address " + scheme + "://" + clip(netloc) + ": empty host");
            }
            out.add(hostPort(scheme, h, prefix));
        }
        return out;
    }

    private static Address hostPort(String scheme, String hp, String prefix) {
        String host = hp;
        String port = "";
        if (hp.startsWith("[")) {
            int end = hp.indexOf(']');
            if (end < 0) {
                throw new IllegalArgumentException("turnstile: host " + clip(hp) + ": unclosed [");
            }
            host = hp.substring(1, end);
            String tail = hp.substring(end + 1);
            if (!tail.isEmpty()) {
                if (!tail.startsWith(":")) {
                    throw new IllegalArgumentException("turnstile: host " + clip(hp) + ": want [addr]:port");
                }
                port = tail.substring(1);
            }
        } else if (hp.indexOf(':') >= 0 && hp.indexOf(':') == hp.lastIndexOf(':')) {
            host = hp.substring(0, hp.indexOf(':'));
            port = hp.substring(hp.indexOf(':') + 1);
        } else if (hp.indexOf(':') >= 0) {
            throw new IllegalArgumentException("turnstile: host " + clip(hp) + ": write an IPv6 address in brackets, [addr]:port");
        }
        if (host.isEmpty()) {
            throw new IllegalArgumentException("turnstile: host " + clip(hp) + ": empty host name");
        }
        for (char c : host.toCharArray()) {
            if (!(Character.isLetterOrDigit(c) || c == '.' || c == '-' || c == '_' || c == ':' || c == '%')) {
                throw new IllegalArgumentException("turnstile: host " + clip(hp) + ": a character a host name does not have");
            }
        }
        if (port.isEmpty() && hp.endsWith(":")) {
            throw new IllegalArgumentException("turnstile: host " + clip(hp) + ": empty port");
        }
        if (port.isEmpty()) {
            return new Address(scheme, host, DEFAULT_PORT, prefix);
        }
        int p;
        try {
            p = port.chars().allMatch(Character::isDigit) && port.length() <= 5 ? Integer.parseInt(port) : -1;
        } catch (NumberFormatException e) {
            p = -1;
        }
        if (p < 1 || p > 65535) {
            throw new IllegalArgumentException("turnstile: host " + clip(hp) + ": port must be 1 to 65535");
        }
        return new Address(scheme, host, p, prefix);
    }

    private static String clip(String s) {
        return '"' + (s.length() <= 64 ? s : s.substring(0, 64) + "...") + '"';
    }
}
