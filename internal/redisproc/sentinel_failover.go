package redisproc

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// PrimaryAddr asks the Sentinels, in turn until one answers, where the
// primary is (SENTINEL get-master-addr-by-name).
func (g *Sentinel) PrimaryAddr() (string, error) {
	var lastErr error
	for _, s := range g.sentinels {
		addr, err := masterAddr(s)
		if err != nil {
			lastErr = err
			continue
		}
		return addr, nil
	}
	return "", fmt.Errorf("no sentinel answered: %w", lastErr)
}

// Primary is the data node the Sentinels name as the primary.
func (g *Sentinel) Primary() (*Server, error) {
	addr, err := g.PrimaryAddr()
	if err != nil {
		return nil, err
	}
	for _, n := range g.nodes {
		if g.PeerAddr(n) == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the sentinels name %s as the primary, which is none of the group's nodes", addr)
}

// WaitFailover waits, at most timeout, until the Sentinels have promoted
// another node than the primary they named when the group started or
// WaitFailover last returned, and that node reports itself a primary
// (role:master). It returns the new primary.
func (g *Sentinel) WaitFailover(timeout time.Duration) (*Server, error) {
	return g.WaitFailoverFrom(g.primary, timeout)
}

// WaitFailoverFrom is WaitFailover away from the primary at address old:
// for a caller that knows which primary it crashed, when the Sentinels
// may have failed over on their own since WaitFailover last returned.
func (g *Sentinel) WaitFailoverFrom(old string, timeout time.Duration) (*Server, error) {
	deadline := time.Now().Add(timeout)
	for {
		// Every Sentinel that answers must agree: a client may ask any.
		var addr string
		agreed := true
		for _, s := range g.sentinels {
			a, err := masterAddr(s)
			if err != nil {
				continue // killed or paused
			}
			if a == old || (addr != "" && a != addr) {
				agreed = false
				break
			}
			addr = a
		}
		if agreed && addr != "" {
			for _, n := range g.nodes {
				if g.PeerAddr(n) != addr {
					continue
				}
				if info, err := n.Do("INFO", "replication"); err == nil && strings.Contains(info, "role:master") {
					g.primary = addr
					return n, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no failover away from %s within %v (sentinels name %q)", old, timeout, addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// masterAddr asks the Sentinel s where the primary is (SENTINEL
// get-master-addr-by-name).
func masterAddr(s *Server) (string, error) {
	reply, err := s.Call("SENTINEL", "get-master-addr-by-name", SentinelMasterSet)
	if err != nil {
		return "", err
	}
	if a, ok := reply.([]any); ok && len(a) == 2 {
		host, _ := a[0].(string)
		port, _ := a[1].(string)
		if host != "" && port != "" {
			return net.JoinHostPort(host, port), nil
		}
	}
	return "", fmt.Errorf("sentinel %s: get-master-addr-by-name replied %v", s.Addr(), reply)
}
