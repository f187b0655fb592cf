package etcdproc

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
)

var _ proc.Member = (*Server)(nil)

// process is the server process a Server embeds: its PID, Pause, Resume
// and Paused are the Server's (see proc.Process).
type process = proc.Process

// Restart kills the server if it runs and starts it again on the same
// ports with the same data directory, so that it keeps its data and, in
// a cluster, rejoins as the same member. It returns once the server
// reports itself healthy, which a cluster member does once it has a
// leader again.
func (s *Server) Restart() error {
	s.Kill()
	return proc.Restart("etcd", 10, 100*time.Millisecond, s.start)
}

// Put writes key = value through the server (which a follower forwards to
// the leader), as a client's put does.
func (s *Server) Put(key, value string) error {
	return s.gateway("/v3/kv/put", map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString([]byte(value)),
	}, nil)
}

// LocalGet reads key from the server's own copy of the data (a
// serializable read, which asks no leader), and reports whether it was
// there: what a member that rejoined has caught up on.
func (s *Server) LocalGet(key string) (value string, ok bool, err error) {
	var out struct {
		KVs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	err = s.gatewayWithin(2*time.Second, "/v3/kv/range", map[string]any{
		"key":          base64.StdEncoding.EncodeToString([]byte(key)),
		"serializable": true,
	}, &out)
	if err != nil || len(out.KVs) == 0 {
		return "", false, err
	}
	return string(out.KVs[0].Value), true, nil
}

// Status asks the server's maintenance API for its own member id and
// the id of the member it follows as leader (0: none).
func (s *Server) Status() (member, leader uint64, err error) {
	var out struct {
		Header struct {
			MemberID string `json:"member_id"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if err := s.gatewayWithin(time.Second, "/v3/maintenance/status", map[string]string{}, &out); err != nil {
		return 0, 0, err
	}
	if member, err = strconv.ParseUint(out.Header.MemberID, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("etcdproc: status: member id %q", out.Header.MemberID)
	}
	if out.Leader != "" {
		if leader, err = strconv.ParseUint(out.Leader, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("etcdproc: status: leader %q", out.Leader)
		}
	}
	return member, leader, nil
}
