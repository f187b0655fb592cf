package redisproc

import (
	"bufio"
	"reflect"
	"strings"
	"testing"
)

func TestReadReply(t *testing.T) {
	for in, want := range map[string]any{
		"+OK\r\n":                        "OK",
		":-3\r\n":                        int64(-3),
		"$5\r\nhe\r\no\r\n":              "he\r\no",
		"$-1\r\n":                        nil,
		"*2\r\n$1\r\na\r\n*1\r\n:1\r\n":  []any{"a", []any{int64(1)}},
		"-MOVED 1 127.0.0.1:7000\r\n":    replyError("MOVED 1 127.0.0.1:7000"),
		"*3\r\n+a\r\n$-1\r\n-ERR x\r\n":  []any{"a", nil, replyError("ERR x")},
		"*0\r\n":                         []any{},
		"$0\r\n\r\n":                     "",
		"*-1\r\n":                        nil,
		"+with spaces and: colons\r\n":   "with spaces and: colons",
		":9223372036854775807\r\n":       int64(9223372036854775807),
		"*1\r\n$3\r\nkey\r\n":            []any{"key"},
		"$3\r\nkey\r\n+trailing ignored": "key",
	} {
		got, err := readReply(bufio.NewReader(strings.NewReader(in)), 0)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("readReply(%q) = %#v, %v; want %#v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "\r\n", "?x\r\n", ":x\r\n", "$x\r\n", "$5\r\nab\r\n", "*x\r\n", "*2\r\n+a\r\n", "$1000000000\r\n", strings.Repeat("*1\r\n", 20) + "+a\r\n"} {
		if got, err := readReply(bufio.NewReader(strings.NewReader(bad)), 0); err == nil {
			t.Errorf("readReply(%q) = %#v, no error", bad, got)
		}
	}
}

// FuzzReadReply checks that no reply, however malformed, makes the
// reader panic or read without end.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "*2\r\n$1\r\na\r\n:1\r\n", "$-1\r\n", "-ERR x\r\n", "*1000000000\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = readReply(bufio.NewReader(strings.NewReader(in)), 0)
	})
}

// FuzzParseClusterNodes checks that no CLUSTER NODES text makes the
// parser panic.
func FuzzParseClusterNodes(f *testing.F) {
	f.Add("e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 [5461->-292f]\n")
	f.Add("07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected\n")
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = parseClusterNodes(in)
	})
}
