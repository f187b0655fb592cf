package service_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeMatchesProto: the code in gen/ is what
// scripts/proto.sh makes from proto/turnstile/v1 now, with protoc and
// the plugins pinned in go.mod: a .proto changed without regenerating
// (or generated code edited by hand) fails here.
func TestGeneratedCodeMatchesProto(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Fatal("protoc not found: install Debian's protobuf-compiler (scripts/test.sh does)")
	}
	out := t.TempDir()
	cmd := exec.Command("../scripts/proto.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/proto.sh: %v\n%s", err, b)
	}
	want := files(t, out)
	got := files(t, "gen")
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("gen/%s is missing: run scripts/proto.sh", name)
		case !bytes.Equal(g, w):
			t.Errorf("gen/%s differs from what scripts/proto.sh makes of the .proto files: run it", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("gen/%s is not made from any .proto file: remove it", name)
		}
	}
}

func files(t *testing.T, root string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		m[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
