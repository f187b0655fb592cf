package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// logged is a member whose server writes a log file, which a restart
// appends to (every launcher's Server).
type logged interface{ LogPath() string }

// logMarks are how long each member's log was when a cell began: what a
// server wrote from there on is the cell's.
type logMarks map[*member]int64

// markLogs notes where each member's log of t ends now.
func markLogs(t target) logMarks {
	marks := logMarks{}
	for _, m := range t.base().members {
		if l, ok := m.ctl.(logged); ok {
			if st, err := os.Stat(l.LogPath()); err == nil {
				marks[m] = st.Size()
			}
		}
	}
	return marks
}

// serverLogPath is where the log of the member named member of a cell is
// kept: beside the cell's history, HISTORY/<store>-<fault>.<member>.log.
func serverLogPath(dir, store, fault, member string) string {
	return filepath.Join(dir, store+"-"+fault+"."+fileName(member)+".log")
}

// fileName makes a member's name ("server 1") a file name ("server-1").
func fileName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, name)
}

// keepLogs copies what every member of t wrote to its log since marks
// into dir, one file per member (serverLogPath). The servers of a
// configuration run from cell to cell, so a member's log holds every
// cell before; a log shorter than its mark was started anew, and is kept
// whole.
func keepLogs(dir string, t target, fault string, marks logMarks) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, m := range t.base().members {
		l, ok := m.ctl.(logged)
		if !ok {
			continue
		}
		if err := copyFrom(l.LogPath(), marks[m], serverLogPath(dir, t.base().name, fault, m.name)); err != nil {
			return fmt.Errorf("keep the log of %s: %w", m.name, err)
		}
	}
	return nil
}

// copyFrom copies src from offset on (from its start if it is shorter
// than that) to dst.
func copyFrom(src string, offset int64, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil {
		return err
	} else if st.Size() < offset {
		offset = 0
	}
	if _, err := in.Seek(offset, io.SeekStart); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
