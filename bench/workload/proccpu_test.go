package workload

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const procStatLine = "4242 (post gres) (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 7 3 20 0 1 0 100 1000000 200 18446744073709551615\n"

func TestParseProcStat(t *testing.T) {
	st, err := parseProcStat(procStatLine)
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 1 || st.utime != 150 || st.stime != 25 || st.cutime != 7 || st.cstime != 3 {
		t.Errorf("parsed %+v, want ppid 1, utime 150, stime 25, cutime 7, cstime 3", st)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2", "4242 (x) S one 2 3 4 5 6 7 8 9 10 11 12 13 14 15", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 -1 2 3 4"} {
		if _, err := parseProcStat(bad); !errors.Is(err, ErrProc) {
			t.Errorf("parseProcStat(%q) = %v, want ErrProc", bad, err)
		}
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add(procStatLine)
	f.Add("1 ((()) R 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0")
	f.Fuzz(func(t *testing.T, line string) {
		st, err := parseProcStat(line)
		if err == nil && (st.utime < 0 || st.stime < 0 || st.cutime < 0 || st.cstime < 0) {
			t.Fatalf("negative CPU time without an error: %+v", st)
		}
	})
}

// TestProcessCPU: a process that burns CPU shows it, and a process that
// does not exist is refused.
func TestProcessCPU(t *testing.T) {
	sh := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 60")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sh.Process.Kill(); _ = sh.Wait() }()
	stats, err := ProcessCPU(sh.Process.Pid)(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stats.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var s Sample
	for s.CPUSeconds == 0 {
		if s, err = stats.Read(ctx); err != nil {
			t.Fatalf("no CPU time seen: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s.Commands == nil {
		t.Error("nil commands")
	}
	if _, err := ProcessCPU(1 << 30)(nil); !errors.Is(err, ErrProc) || !strings.Contains(err.Error(), "process") {
		t.Errorf("a missing process: %v, want ErrProc", err)
	}
}
