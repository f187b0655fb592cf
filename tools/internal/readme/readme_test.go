package readme

import (
	"strings"
	"testing"
)

func TestBlocks(t *testing.T) {
	md := "# Title\n\ntext\n\n## Use\n\n```go\npackage main\n```\n\n" +
		"~~~sh\necho ```\n~~~\n\n   ````go title\nx := 1\n```\ny := 2\n````\n"
	got, err := Blocks(md)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Lang: "go", Line: 8, Heading: "Use", Code: "package main\n"},
		{Lang: "sh", Line: 12, Heading: "Use", Code: "echo ```\n"},
		{Lang: "go", Line: 16, Heading: "Use", Code: "x := 1\n```\ny := 2\n"},
	}
	if len(got) != len(want) {
		t.Fatalf("Blocks = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("block %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := Blocks("text\n```go\nnever closed\n"); err == nil || !strings.Contains(err.Error(), "line 2: code block opened with ``` is never closed") {
		t.Errorf("an unclosed block: %v", err)
	}
	if _, err := Program(md, "Use"); err != nil {
		t.Errorf("Program: %v", err)
	}
	if _, err := Program("## Use\n\n```go\nx := 1\n```\n", "Use"); err == nil || !strings.Contains(err.Error(), "not a complete program") {
		t.Errorf("Program of a fragment: %v", err)
	}
	if _, err := Program(md, "Missing"); err == nil {
		t.Error("Program of a missing heading: no error")
	}
}

func FuzzBlocks(f *testing.F) {
	f.Add("## Use\n\n```go\npackage main\n```\n")
	f.Add("```\n```\n~~~~\n~~~\n~~~~\n")
	f.Add("    ```go\n```go `x`\n")
	f.Add("```go\r\nx\r\n```\r\n")
	f.Fuzz(func(t *testing.T, md string) {
		blocks, err := Blocks(md)
		if err != nil {
			return
		}
		lines := strings.Count(md, "\n") + 1
		prev := 0
		for _, b := range blocks {
			if b.Line <= prev || b.Line > lines+1 {
				t.Fatalf("block at line %d after %d, of %d lines", b.Line, prev, lines)
			}
			prev = b.Line
			for _, l := range strings.SplitAfter(b.Code, "\n") {
				if !strings.Contains(md, strings.TrimSuffix(l, "\n")) {
					t.Fatalf("block code line %q is not in the input", l)
				}
			}
		}
	})
}
