package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrProc is a process whose CPU time /proc does not show, or shows in a
// form this package cannot read.
var ErrProc = errors.New("workload: /proc")

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux platform Go supports.
const clockTicks = 100

// ProcessCPU returns Stats that read the CPU time of the server process
// pid and of every process it started: its own user and system time, its
// children's that it has waited for (a PostgreSQL backend that exited
// during the cell), and the live children's. It counts no commands: it
// is for stores whose servers report none that a cell could read cheaply
// (ZooKeeper with its four-letter words off) or whose counters would
// need a session of their own. Linux only.
func ProcessCPU(pid int) func(addrs []string) (Stats, error) {
	return func([]string) (Stats, error) {
		if _, err := readProcStat(pid); err != nil {
			return nil, err
		}
		return procStats{pid: pid}, nil
	}
}

type procStats struct{ pid int }

func (procStats) Close() {}

func (p procStats) Read(ctx context.Context) (Sample, error) {
	own, err := readProcStat(p.pid)
	if err != nil {
		return Sample{}, err
	}
	ticks := own.utime + own.stime + own.cutime + own.cstime
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		if ctx.Err() != nil {
			return Sample{}, ctx.Err()
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil || pid == p.pid {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.ppid != p.pid {
			continue // gone since the glob, or not the server's
		}
		ticks += st.utime + st.stime
	}
	return Sample{Commands: CommandStats{}, CPUSeconds: float64(ticks) / clockTicks}, nil
}

// procStat is what ProcessCPU needs of /proc/<pid>/stat.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

func readProcStat(pid int) (procStat, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, fmt.Errorf("%w: process %d: %w", ErrProc, pid, err)
	}
	return parseProcStat(string(raw))
}

// parseProcStat reads a /proc/<pid>/stat line. The command name, field
// 2, is in parentheses and may hold spaces and parentheses itself, so
// the fields are counted from its last ')'.
func parseProcStat(line string) (procStat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("%w: stat without a command name", ErrProc)
	}
	// After the name: state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(line[i+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("%w: stat with %d fields after the command name, want at least 15", ErrProc, len(f))
	}
	var st procStat
	var err error
	if st.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("%w: stat ppid: %w", ErrProc, err)
	}
	for j, dst := range []*int64{&st.utime, &st.stime, &st.cutime, &st.cstime} {
		if *dst, err = strconv.ParseInt(f[11+j], 10, 64); err != nil || *dst < 0 {
			return procStat{}, fmt.Errorf("%w: stat field %d: %q", ErrProc, 14+j, f[11+j])
		}
	}
	return st, nil
}
