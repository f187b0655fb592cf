// Package readme reads the Go code blocks of a Markdown file, so that tests
// can compile what the README shows.
package readme

import (
	"fmt"
	"strings"
)

// Block is one fenced code block of a Markdown file.
type Block struct {
	Lang    string // the info string's first word: "go", "sh", ""
	Line    int    // 1-based line of the block's first code line
	Heading string // text of the nearest heading above it, without the #s
	Code    string // the lines between the fences, each ending in a newline
}

// Blocks returns the fenced code blocks (``` or ~~~, three or more) of
// the Markdown in md, in order. An unclosed fence is an error.
func Blocks(md string) ([]Block, error) {
	var (
		out     []Block
		heading string
		in      bool
		fence   string
		cur     Block
		code    strings.Builder
	)
	lines := strings.SplitAfter(md, "\n")
	for i, raw := range lines {
		line := strings.TrimRight(raw, "\r\n")
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		if in {
			if indent <= 3 && strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.Trim(trimmed, fence[:1])) == "" {
				cur.Code = code.String()
				out = append(out, cur)
				in = false
				continue
			}
			code.WriteString(line)
			code.WriteByte('\n')
			continue
		}
		if indent > 3 {
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			in, fence = true, f
			info := strings.Fields(trimmed[len(f):])
			cur = Block{Line: i + 2, Heading: heading}
			if len(info) > 0 {
				cur.Lang = info[0]
			}
			code.Reset()
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			h := strings.TrimLeft(trimmed, "#")
			if h == "" || h[0] == ' ' || h[0] == '\t' {
				heading = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(h), "#"))
			}
		}
	}
	if in {
		return out, fmt.Errorf("line %d: code block opened with %s is never closed", cur.Line-1, fence)
	}
	return out, nil
}

// fenceOf returns the opening fence at the start of line (three or more
// backticks or tildes), or "".
func fenceOf(line string) string {
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(line) && line[n] == c {
			n++
		}
		if n >= 3 {
			// A backtick fence's info string may not contain backticks.
			if c == '`' && strings.Contains(line[n:], "`") {
				return ""
			}
			return line[:n]
		}
	}
	return ""
}

// GoBlocks returns the blocks of md whose language is go.
func GoBlocks(md string) ([]Block, error) {
	all, err := Blocks(md)
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, b := range all {
		if b.Lang == "go" {
			out = append(out, b)
		}
	}
	return out, nil
}

// Program returns the Go block under the heading named heading, which must
// be a complete program (it starts with a package clause).
func Program(md, heading string) (Block, error) {
	blocks, err := GoBlocks(md)
	if err != nil {
		return Block{}, err
	}
	for _, b := range blocks {
		if b.Heading == heading {
			if !strings.HasPrefix(strings.TrimSpace(b.Code), "package ") {
				return Block{}, fmt.Errorf("line %d: the Go block under %q is not a complete program (no package clause)", b.Line, heading)
			}
			return b, nil
		}
	}
	return Block{}, fmt.Errorf("no Go block under a heading %q", heading)
}
