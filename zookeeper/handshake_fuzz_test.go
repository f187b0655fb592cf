package zookeeper

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// byteConn is a net.Conn that reads from r, at most max bytes a read, and
// records the read deadline last set.
type byteConn struct {
	net.Conn
	r        io.Reader
	max      int
	deadline time.Time
}

func (c *byteConn) Read(p []byte) (int, error) {
	if len(p) > c.max {
		p = p[:c.max]
	}
	return c.r.Read(p)
}

func (c *byteConn) SetReadDeadline(t time.Time) error { c.deadline = t; return nil }

// FuzzHandshakeConn: whatever a server sends, in reads of any size, the
// connection passes every byte through unchanged and never panics; it
// records the session timeout of a connect response whose session id is
// not 0, and no other; and it holds read deadlines to its handshake bound
// until the response is in, and not after.
func FuzzHandshakeConn(f *testing.F) {
	resp := func(timeoutMs int32, session uint64, rest ...byte) []byte {
		b := make([]byte, connectHead)
		binary.BigEndian.PutUint32(b, uint32(connectHead-4+len(rest)))
		binary.BigEndian.PutUint32(b[8:], uint32(timeoutMs))
		binary.BigEndian.PutUint64(b[12:], session)
		return append(b, rest...)
	}
	f.Add(resp(4000, 42, 0, 0, 0, 16), 1)
	f.Add(resp(30000, 0), 3)
	f.Add(resp(-1, 1), 64)
	f.Add([]byte{0, 0, 0}, 1)
	f.Add([]byte{}, 5)
	f.Fuzz(func(t *testing.T, data []byte, chunk int) {
		if chunk < 1 || chunk > 1<<16 {
			return
		}
		tr := newConnTracker(1, time.Second, nil)
		until := time.Now().Add(time.Hour)
		raw := &byteConn{r: bytes.NewReader(data), max: chunk}
		c := &handshakeConn{Conn: raw, t: tr, until: until}
		var got []byte
		buf := make([]byte, 7)
		for {
			late := time.Now().Add(2 * time.Hour)
			_ = c.SetReadDeadline(late)
			inBefore := len(got) >= connectHead
			if !inBefore && !raw.deadline.Equal(until) {
				t.Fatalf("deadline %v before the connect response is in, want the bound %v", raw.deadline, until)
			}
			if inBefore && !raw.deadline.Equal(late) {
				t.Fatalf("deadline %v after the connect response, want %v as set", raw.deadline, late)
			}
			n, err := c.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("read %x, want %x", got, data)
		}
		want := time.Duration(0)
		if len(data) >= connectHead && binary.BigEndian.Uint64(data[12:]) != 0 {
			want = time.Duration(int32(binary.BigEndian.Uint32(data[8:]))) * time.Millisecond
		}
		if g := tr.grantedTimeout(); g != want {
			t.Fatalf("granted %v, want %v", g, want)
		}
	})
}
