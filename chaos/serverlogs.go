package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"
)

// logged is a member whose server writes a log file, which a restart
// appends to (every launcher's Server).
type logged interface{ LogPath() string }

// serverLog is a log a cell keeps: a member's, or the proxies'.
type serverLog struct{ name, path string }

// logsOf are the logs of t's members, and the proxies' when they log
// (proxyLog).
func logsOf(t target, proxies string) []serverLog {
	var out []serverLog
	for _, m := range t.base().members {
		if l, ok := m.ctl.(logged); ok {
			out = append(out, serverLog{m.name, l.LogPath()})
		}
	}
	if proxies != "" && len(t.base().proxies) > 0 {
		out = append(out, serverLog{"proxies", proxies})
	}
	return out
}

// logMarks are how long each log was when a cell began, by path: what
// was written from there on is the cell's.
type logMarks map[string]int64

// markLogs notes where each log ends now.
func markLogs(logs []serverLog) logMarks {
	marks := logMarks{}
	for _, l := range logs {
		if st, err := os.Stat(l.path); err == nil {
			marks[l.path] = st.Size()
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

// keepLogs copies what was written to each of logs since marks into
// dir, one file each (serverLogPath). The servers of a configuration run
// from cell to cell, so a member's log holds every cell before; a log
// shorter than its mark was started anew, and is kept whole.
func keepLogs(dir, store, fault string, logs []serverLog, marks logMarks) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, l := range logs {
		if err := copyFrom(l.path, marks[l.path], serverLogPath(dir, store, fault, l.name)); err != nil {
			return fmt.Errorf("keep the log of %s: %w", l.name, err)
		}
	}
	return nil
}

// logProxies makes the proxies started from now on log their
// connections to the file path (appended to), at debug level, each line
// stamped in Unix nanoseconds as the history's events are; the returned
// function closes the file and puts the proxies' silence back.
func logProxies(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	zerolog.TimeFieldFormat = zerolog.TimeFormatUnixNano
	l := zerolog.New(f).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	proxyServer.Logger = &l
	return func() {
		nop := zerolog.Nop()
		proxyServer.Logger = &nop
		f.Close()
	}, nil
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
