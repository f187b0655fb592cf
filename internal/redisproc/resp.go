package redisproc

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Do sends one command and returns the first line of the reply without its
// type byte (for example "PONG" or "1"), or the whole bulk string. A Redis
// error reply becomes an error. It is for set-up and inspection, not load.
func (s *Server) Do(args ...string) (string, error) {
	conn, err := s.send([][]string{args}, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line[1:], nil
}

// Call sends one command and returns its whole reply: a string for a
// simple or bulk string, an int64 for an integer, nil for a null, []any
// for an array (of the same), and a Redis error reply as an error. Unlike
// Do it reads arrays, such as the replies of ROLE, CLUSTER SLOTS and
// CLUSTER GETKEYSINSLOT. It is for set-up and inspection, not load.
func (s *Server) Call(args ...string) (any, error) {
	replies, err := s.exchange([][]string{args})
	if err != nil {
		return nil, err
	}
	if e, ok := replies[0].(error); ok {
		return nil, e
	}
	return replies[0], nil
}

// exchange sends cmds on one connection, in order, and returns their
// replies; an error reply is an error value in its place, so that a
// command after ASKING can be told from the ASKING.
func (s *Server) exchange(cmds [][]string) ([]any, error) {
	conn, err := s.send(cmds, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	replies := make([]any, len(cmds))
	for i := range cmds {
		if replies[i], err = readReply(rd, 0); err != nil {
			return nil, err
		}
	}
	return replies, nil
}

// send connects to the server, in TLS where it speaks it, and sends cmds
// on the connection, which the caller reads the replies from, and closes,
// within timeout.
func (s *Server) send(cmds [][]string, timeout time.Duration) (net.Conn, error) {
	var conn net.Conn
	var err error
	if s.dial != nil {
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", s.Addr(), s.dial)
	} else {
		conn, err = net.DialTimeout("tcp", s.Addr(), time.Second)
	}
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	for _, args := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// replyError is a Redis error reply.
type replyError string

func (e replyError) Error() string { return string(e) }

// maxBulk bounds the bulk strings readReply reads: the replies of
// set-up and inspection commands are small, and a garbled length must
// not allocate gigabytes.
const maxBulk = 64 << 20

// readReply reads one RESP2 reply; depth bounds the nesting of arrays.
func readReply(rd *bufio.Reader, depth int) (any, error) {
	if depth > 8 {
		return nil, errors.New("reply nested too deep")
	}
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return replyError(line[1:]), nil
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := length(line, "bulk")
		if err != nil || n < 0 {
			return nil, err
		}
		if n > maxBulk {
			return nil, fmt.Errorf("bulk string of %d bytes, more than %d", n, maxBulk)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := length(line, "array")
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, 0, min(n, 1024))
		for range n {
			v, err := readReply(rd, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}

// length reads the length of a bulk string or an array (what) from the
// line that begins it; a negative one is a null.
func length(line, what string) (int, error) {
	n, err := strconv.Atoi(line[1:])
	if err != nil {
		return 0, fmt.Errorf("bad %s length %q", what, line)
	}
	return n, nil
}
