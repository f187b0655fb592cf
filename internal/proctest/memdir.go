package proctest

import (
	"os"
	"testing"
)

// MemDir is a temporary directory named prefix…, removed when the test
// ends, in memory where /dev/shm exists (elsewhere, t.TempDir): servers
// that fsync every write, or initialise a data directory, are slow on a
// busy disk.
func MemDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", prefix)
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
