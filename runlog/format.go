package runlog

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

const (
	// MaxLineBytes bounds every line the log writes, newline not counted.
	MaxLineBytes = 80
	// MaxMessageBytes is what an entry's message may take before it is
	// clipped: the line less its "HH:MM:SS " stamp.
	MaxMessageBytes = MaxLineBytes - len(entryLayout) - 1
	// titlePrefix starts the first header line; its presence is how a file
	// is recognised as a lavender run log.
	titlePrefix = "# lavender-2 run log "
	titleLayout = "2006-01-02 15:04:05"
	// zoneLayout follows the title's time since titles name their zone;
	// titles written before that have none.
	zoneLayout  = "-0700"
	entryLayout = "15:04:05"
	ellipsis    = "…"
)

var (
	markerRE = regexp.MustCompile(`^# \[\.\.\.compacted (\d+) lines, round (\d+)\]$`)
	titleRE  = regexp.MustCompile(`^# lavender-2 run log \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?: ([+-]\d{4}))?$`)
)

// File is a parsed run log. The layout on disk is, in order: Header lines,
// then entries, with at most one Marker line after the first entry.
type File struct {
	// Header holds the title line and, if present, one "# text" line.
	Header []string
	// First is the run's first entry, which compaction never drops.
	First string
	// Marker is non-nil once the file has been compacted.
	Marker *Marker
	// Entries are the entries after First (and after the marker, if any).
	Entries []string
}

// Marker is the single line that stands in for compacted entries.
type Marker struct {
	Dropped uint64 // entries dropped over all rounds
	Rounds  uint64
}

func (m Marker) String() string {
	return fmt.Sprintf("# [...compacted %d lines, round %d]", m.Dropped, m.Rounds)
}

// AllEntries returns First followed by Entries.
func (f *File) AllEntries() []string {
	if f.First == "" {
		return f.Entries
	}
	return append([]string{f.First}, f.Entries...)
}

// Bytes renders the file in its on-disk form; every line ends in "\n".
func (f *File) Bytes() []byte {
	var b bytes.Buffer
	for _, h := range f.Header {
		b.WriteString(h)
		b.WriteByte('\n')
	}
	if f.First != "" {
		b.WriteString(f.First)
		b.WriteByte('\n')
	}
	if f.Marker != nil {
		b.WriteString(f.Marker.String())
		b.WriteByte('\n')
	}
	for _, e := range f.Entries {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Parse reads a run log strictly: it fails on anything lavender would not
// have written, so tests and tools can tell a healthy log from a damaged one.
func Parse(data []byte) (*File, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("runlog: parse: empty file")
	}
	if data[len(data)-1] != '\n' {
		return nil, fmt.Errorf("runlog: parse: last line is not terminated")
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("runlog: parse: not valid UTF-8")
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	f := &File{}
	for i, line := range lines {
		n := i + 1
		if len(line) > MaxLineBytes {
			return nil, fmt.Errorf("runlog: parse: line %d is %d bytes, over %d", n, len(line), MaxLineBytes)
		}
		switch {
		case i == 0:
			if !titleRE.MatchString(line) {
				return nil, fmt.Errorf("runlog: parse: line 1 is not a run-log title")
			}
			f.Header = append(f.Header, line)
		case markerRE.MatchString(line):
			if f.Marker != nil {
				return nil, fmt.Errorf("runlog: parse: line %d is a second marker", n)
			}
			m, _ := parseMarker(line)
			f.Marker = &m
		case i == 1 && strings.HasPrefix(line, "# "):
			f.Header = append(f.Header, line)
		case !isEntry(line):
			return nil, fmt.Errorf("runlog: parse: line %d is not an entry", n)
		case f.First == "" && f.Marker == nil:
			f.First = line
		default:
			f.Entries = append(f.Entries, line)
		}
	}
	return f, nil
}

// salvage reads whatever is on disk into a File, keeping every line it can.
// Unlike Parse it never fails: a hand-edited or foreign file becomes entries
// under a restored header, so nothing a person wrote is silently lost. A
// line without a time is stamped with the time of the repair.
func salvage(data []byte, started, repaired time.Time) *File {
	f := &File{}
	text := strings.ToValidUTF8(string(data), "\uFFFD")
	lines := strings.Split(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	title := titleLine(started)
	if len(lines) > 0 && titleRE.MatchString(lines[0]) {
		title = lines[0]
	}
	repaired = repaired.In(zoneOf(title, repaired))
	var rest []string
	for i, line := range lines {
		switch {
		case i == 0 && titleRE.MatchString(line):
			f.Header = append(f.Header, line)
		case i == 1 && len(f.Header) == 1 && strings.HasPrefix(line, "# ") && !markerRE.MatchString(line):
			f.Header = append(f.Header, clipLine(sanitize(line)))
		case markerRE.MatchString(line):
			if m, ok := parseMarker(line); ok && (f.Marker == nil || m.Rounds > f.Marker.Rounds) {
				f.Marker = &m
			}
		case strings.TrimSpace(line) == "":
		case isEntry(line):
			rest = append(rest, clipLine(sanitize(line)))
		default:
			rest = append(rest, entryLine(repaired, line))
		}
	}
	if len(f.Header) == 0 {
		f.Header = []string{title}
	}
	if len(rest) > 0 {
		f.First, f.Entries = rest[0], rest[1:]
	}
	return f
}

func parseMarker(line string) (Marker, bool) {
	m := markerRE.FindStringSubmatch(line)
	if m == nil {
		return Marker{}, false
	}
	dropped, err1 := strconv.ParseUint(m[1], 10, 64)
	rounds, err2 := strconv.ParseUint(m[2], 10, 64)
	return Marker{Dropped: dropped, Rounds: rounds}, err1 == nil && err2 == nil
}

// isEntry reports whether line has the "HH:MM:SS message" shape.
func isEntry(line string) bool {
	if len(line) < len(entryLayout) {
		return false
	}
	if _, err := time.Parse(entryLayout, line[:len(entryLayout)]); err != nil {
		return false
	}
	return len(line) == len(entryLayout) || line[len(entryLayout)] == ' '
}

// titleLine is the first line of a run log: its start, in the creator's
// zone, with the zone's offset. Every entry of the file is stamped in that
// zone (see zoneOf), whoever appends it.
func titleLine(t time.Time) string {
	return titlePrefix + t.Format(titleLayout+" "+zoneLayout)
}

// zoneOf returns the zone a file with this title stamps its entries in:
// the fixed offset the title names. A title from before titles named
// their zone (or none) leaves entries in now's zone, as they always were.
func zoneOf(title string, now time.Time) *time.Location {
	m := titleRE.FindStringSubmatch(title)
	if m == nil || m[1] == "" {
		return now.Location()
	}
	t, err := time.Parse(zoneLayout, m[1])
	if err != nil {
		return now.Location()
	}
	_, offset := t.Zone()
	return time.FixedZone("", offset)
}

// headerLine turns free header text into "# text", clipped like an entry.
// Text that would read as the compaction marker is quoted: the marker is
// runlog's own count of what it dropped, and a header that looked like it
// would be taken for it by Parse, by the next compaction and by a reader.
func headerLine(text string) string {
	line := clipLine("# " + sanitize(text))
	if markerRE.MatchString(line) {
		line = clipLine(`# "` + strings.TrimPrefix(line, "# ") + `"`)
	}
	return line
}

// entryLine formats one entry: "HH:MM:SS message", clipped to MaxLineBytes.
func entryLine(t time.Time, msg string) string {
	return clipLine(t.Format(entryLayout) + " " + sanitize(msg))
}

// sanitize keeps a message on one line: control characters (newlines
// included) become spaces, invalid UTF-8 becomes U+FFFD, and invisible
// format characters (Unicode category Cf: bidi overrides, direction marks,
// zero-width characters) are dropped, since they make a line read as
// something it does not say.
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		if unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
}

// clipLine cuts s to MaxLineBytes on a rune boundary, ending in "…".
func clipLine(s string) string { return Truncate(s, MaxLineBytes) }

// Truncate cuts s to at most max bytes (max >= 3) on a rune boundary,
// ending in "…", so the result stays valid UTF-8.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
