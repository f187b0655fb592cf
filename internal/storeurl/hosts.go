package storeurl

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// SplitHosts returns the addresses (host:port) of the host part of a
// URL that names one server or several, host[:port][,host[:port]...],
// with defaultPort where an entry names none and emptyHost where it names
// no host ("" refuses such entries). An empty entry in a list, and an
// entry that ends in ':' with no port after it, are refused. IPv6
// literals need brackets, as in [::1]:6379.
func SplitHosts(hosts, defaultPort, emptyHost string) ([]string, error) {
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
		if !validHost(e, host) {
			return nil, fmt.Errorf("host %q: want host:port, or [address]:port for IPv6", e)
		}
		if host == "" {
			if emptyHost == "" {
				return nil, fmt.Errorf("host %d of %q has no host name", i+1, hosts)
			}
			host = emptyHost
		}
		if port == "" {
			if strings.HasSuffix(e, ":") {
				return nil, fmt.Errorf("host %q has an empty port", e)
			}
			port = defaultPort
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("port %q is not a number in [1, 65535]", port)
		}
		addrs = append(addrs, net.JoinHostPort(host, port))
	}
	return addrs, nil
}

// validHost reports whether host, as url.URL reads it from the entry e,
// is a name, an IPv4 address or an IPv6 address in brackets.
func validHost(e, host string) bool {
	if strings.ContainsAny(host, "[]") {
		return false
	}
	if strings.HasPrefix(e, "[") || strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		return err == nil && a.Is6() && strings.HasPrefix(e, "[")
	}
	return true
}
