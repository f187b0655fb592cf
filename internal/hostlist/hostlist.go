// Package hostlist splits the host part of a URL naming several servers,
// host[:port][,host[:port]...], into host:port addresses.
package hostlist

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Split returns the addresses of hosts, with defaultPort where an entry
// names none and emptyHost where it names no host ("" refuses such
// entries). An empty entry in a list is refused. IPv6 literals need
// brackets.
func Split(hosts, defaultPort, emptyHost string) ([]string, error) {
	entries := strings.Split(hosts, ",")
	addrs := make([]string, 0, len(entries))
	for i, e := range entries {
		if e == "" && len(entries) > 1 {
			return nil, fmt.Errorf("host %d of %q is empty", i+1, hosts)
		}
		// url.URL splits host and port as for a URL of one host, brackets
		// of IPv6 literals included.
		h := &url.URL{Host: e}
		host, port := h.Hostname(), h.Port()
		if host == "" {
			if emptyHost == "" {
				return nil, fmt.Errorf("host %d of %q has no host name", i+1, hosts)
			}
			host = emptyHost
		}
		if port == "" {
			port = defaultPort
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("port %q is not a number in [1, 65535]", port)
		}
		if _, err := netip.ParseAddr(host); strings.Contains(host, ":") && err != nil || strings.ContainsAny(host, "[]") {
			return nil, fmt.Errorf("host %q: want host:port, or [address]:port for IPv6", e)
		}
		addrs = append(addrs, net.JoinHostPort(host, port))
	}
	return addrs, nil
}
