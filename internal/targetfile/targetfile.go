// Package targetfile is what every channel's target files share: finding
// them in the config dir, reading one safely (a regular file, bounded,
// never waiting on a FIFO), the file:line error of a refused line, and the
// per-line report `check` prints. Each channel parses its own lines.
package targetfile

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// LineError is a line of a target file that was refused:
// "phone.bark.env:7: not configured: …". Reason is a fixed text (with
// numbers and names of settings at most), never any part of the line,
// which may hold a key or a token.
type LineError struct {
	File   string
	Line   int
	Reason string
}

func (e *LineError) Error() string { return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Reason }

// DirError is a failure of the config directory itself, as opposed to bad
// lines in its files.
type DirError struct {
	Channel string // "bark", "ntfy": whose files were looked for
	Err     error
}

func (e *DirError) Error() string { return e.Channel + " config dir: " + e.Err.Error() }
func (e *DirError) Unwrap() error { return e.Err }

// List returns the names of the files in dir ("" is ".") that end in
// suffix, sorted; a dir that is missing, not a directory or unreadable is
// a *DirError naming channel.
func List(dir, channel, suffix string) ([]string, error) {
	if dir == "" {
		dir = "."
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, &DirError{channel, err}
	}
	if !st.IsDir() {
		return nil, &DirError{channel, fmt.Errorf("%s is not a directory", dir)}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, &DirError{channel, err}
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Read reads a target file (or a token file), following a symlink as a
// user would expect, and returns its permissions; data is nil for anything
// but a regular file, and non-nil (maybe empty) for one. The file is
// opened without waiting (a FIFO opens at once) and judged by what was
// opened, so one swapped for a FIFO or a device after a look at its name
// can neither hang a reload nor be read. A file over limit bytes is an
// error.
func Read(path string, limit int64) (data []byte, perm os.FileMode, err error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, nil
	}
	data, err = io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, 0, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	if data == nil {
		data = []byte{}
	}
	return data, fi.Mode().Perm(), nil
}

// Line is one line of a check's report: a good target's or a refused one's.
type Line struct {
	File string
	Line int
	Text string // "phone.bark.env:3 ok (api.day.app)", or the LineError's text
}

// Report orders lines by file and line, as the files read: what `check`
// prints, so that one bad line hides none of the good ones.
func Report(lines []Line, bad []*LineError) []string {
	for _, e := range bad {
		lines = append(lines, Line{e.File, e.Line, e.Error()})
	}
	slices.SortStableFunc(lines, func(a, b Line) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return a.Line - b.Line
	})
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Text
	}
	return out
}

// InClearTo returns the host[:port] of rawURL when a request to it would
// carry its credential in clear over the network: plain http to a host
// other than this one's loopback. It returns "" for https, for loopback
// (a server beside lavender, or a tunnel's local end) and for a URL that
// does not parse.
func InClearTo(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || !strings.EqualFold(u.Scheme, "http") || u.Host == "" {
		return ""
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return ""
	}
	return u.Host
}
