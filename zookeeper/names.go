package zookeeper

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// seqDigits is how many digits ZooKeeper appends to a sequential node.
const seqDigits = 10

// escape turns s into a valid znode name: bytes outside [A-Za-z0-9_:-]
// become %XX, so "/", ".", "..", control and unpaired-surrogate
// characters cannot occur, and the mapping is one-to-one.
func escape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == ':', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// node is one contender's node in a key's directory.
type node struct {
	name  string // as listed: <escaped owner>-<seq>
	owner string // escaped
	seq   uint64
}

// parseNode splits a child name; ok is false for names this package did
// not create.
func parseNode(name string) (node, bool) {
	if len(name) < seqDigits+2 || name[len(name)-seqDigits-1] != '-' {
		return node{}, false
	}
	seq, err := strconv.ParseUint(name[len(name)-seqDigits:], 10, 64)
	if err != nil {
		return node{}, false
	}
	return node{name: name, owner: name[:len(name)-seqDigits-1], seq: seq}, true
}

// queue returns the key's contenders in arrival order.
func queue(children []string) []node {
	q := make([]node, 0, len(children))
	for _, c := range children {
		if n, ok := parseNode(c); ok {
			q = append(q, n)
		}
	}
	sort.Slice(q, func(i, j int) bool { return q[i].seq < q[j].seq })
	return q
}

// cleanRoot checks and normalises a root path such as /turnstile/locks.
func cleanRoot(root string) (string, error) {
	root = strings.TrimRight(root, "/")
	if root == "" {
		return "", nil
	}
	if !strings.HasPrefix(root, "/") {
		return "", fmt.Errorf("path %q does not start with /", root)
	}
	for _, part := range strings.Split(root[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return "", fmt.Errorf("path %q has an empty, . or .. element", root)
		}
	}
	return root, nil
}
