package bark

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/lavender-ml/lavender/internal/targetfile"
	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/notify"
)

const (
	// ConfigSuffix is how a Bark target file's name ends.
	ConfigSuffix = ".bark.env"
	// Placeholder marks where a template takes the message.
	Placeholder = "$0"

	// maxConfigFileBytes bounds one target file; a real one is a few lines.
	maxConfigFileBytes = 1 << 20
	// probe stands in for the message while a template is validated; it is
	// unreserved-only, so it survives url.Parse unchanged wherever it sits.
	probe = "LAVENDERPROBE0"
)

// Target is one URL template from a *.bark.env file. Its template carries a
// device key, so a Target prints, formats and logs as "file:line" only.
type Target struct {
	File string // base name of the file, e.g. "phone.bark.env"
	Line int    // 1-based line number

	tmpl string // template with the level/isArchive query already appended
	// unleveled is the template with isArchive appended but no level, for
	// a push louder than passive; ownLevel: the template sets its level,
	// which then wins over every push's.
	unleveled string
	ownLevel  bool
	id        string   // hash of the template: the target's identity for dedup
	phone     string   // the PHONE= setting above it; "": none
	host      string   // host[:port], which is not secret and helps `bark check`
	secrets   []string // parts of the template to scrub from any detail text
	// enc encrypts this target's pushes end to end (a BARK_ENCRYPTION line
	// above the template in its file); nil sends them in clear.
	enc   *encryption
	shape encryptedShape // the template taken apart for encryption; with enc only
}

// Encryption is the algorithm of the target's end-to-end encryption, e.g.
// "aes-256-gcm", or "" when its pushes go in clear. Never the key.
func (t Target) Encryption() string {
	if t.enc == nil {
		return ""
	}
	return t.enc.Algorithm()
}

// Name is the target's public name, "file:line". It is what metrics, logs
// and HTTP answers use, never the URL.
func (t Target) Name() string { return t.File + ":" + strconv.Itoa(t.Line) }

// Host is the Bark server's host[:port].
func (t Target) Host() string { return t.host }

// String, GoString, Format and LogValue keep the template (and its key)
// out of every fmt verb and slog.
func (t Target) String() string { return t.Name() }

// GoString implements fmt.GoStringer.
func (t Target) GoString() string { return "bark.Target(" + t.Name() + ")" }

// Format implements fmt.Formatter: every verb prints the name, so that no
// verb (%d, %x) reaches the fields.
func (t Target) Format(f fmt.State, verb rune) { textsafe.FormatAs(f, verb, t.Name(), t.GoString()) }

// LogValue implements slog.LogValuer.
func (t Target) LogValue() slog.Value { return slog.StringValue(t.Name()) }

// LoadResult is what LoadTargets found.
type LoadResult struct {
	Targets  []Target
	Bad      []*LineError // every line refused, in file and line order
	Files    []string     // every *.bark.env file read, base names, sorted
	Warnings []string     // e.g. a file readable by group or others
}

// LineError is a line of a target file that was refused: "phone.bark.env:7:
// not configured: …". Reason is a fixed text, never any part of the line,
// which holds a key.
type LineError = targetfile.LineError

// Report is one line per template line, good and bad alike, in file and
// line order: "phone.bark.env:3 ok (api.day.app, aes-256-gcm)" or
// "phone.bark.env:7: not configured: …". What `bark check` prints: one bad
// line must not hide the good ones.
func (r LoadResult) Report() []string {
	lines := make([]targetfile.Line, 0, len(r.Targets))
	for _, t := range r.Targets {
		detail := t.Host()
		if alg := t.Encryption(); alg != "" {
			detail += ", " + alg
		}
		lines = append(lines, targetfile.Line{File: t.File, Line: t.Line, Text: t.Name() + " ok (" + detail + ")"})
	}
	return targetfile.Report(lines, r.Bad)
}

// LoadTargets reads every *.bark.env file in dir. Each non-blank line not
// starting with "#" must be an http(s) URL template containing $0. Errors
// name file:line and never the line's text, which holds a device key; all
// bad lines are reported together so one run of `bark check` finds them all.
// The good targets are returned even then; a failure of dir itself is a
// *ConfigDirError and returns none.
func LoadTargets(dir string) (LoadResult, error) {
	var res LoadResult
	names, err := targetfile.List(dir, ChannelName, ConfigSuffix)
	if err != nil {
		return res, err
	}
	if dir == "" {
		dir = "."
	}
	var errs []error
	for _, name := range names {
		path := filepath.Join(dir, name)
		data, perm, err := targetfile.Read(path, maxConfigFileBytes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if data == nil {
			continue // a directory, FIFO or device that happens to match the suffix
		}
		if perm&0o044 != 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf(
				"%s is readable by group or others (mode %04o) but holds device keys; run chmod 600 on it", name, perm))
		}
		res.Files = append(res.Files, name)
		ts, bad := parseLines(name, data)
		for _, t := range ts {
			if host := targetfile.InClearTo(t.tmpl); host != "" {
				res.Warnings = append(res.Warnings, fmt.Sprintf(
					"%s sends its device key over plain http to %s, where anyone on the way can read it; use https", t.Name(), host))
			}
		}
		res.Targets = append(res.Targets, ts...)
		res.Bad = append(res.Bad, bad...)
		for _, e := range bad {
			errs = append(errs, e)
		}
	}
	rememberSecrets(res.Targets)
	return res, errors.Join(errs...)
}

// ConfigDirError is a LoadTargets failure of the directory itself, as
// opposed to bad lines in its files.
type ConfigDirError = targetfile.DirError

// parseTargets parses one file's content; name is used in Target.File and
// in errors. It returns the good targets even when some lines are bad.
//
// A line BARK_ENCRYPTION=<algorithm>:<key> encrypts the pushes of the
// templates after it in the file, up to the next such line. When that line
// is bad, the templates under it are refused too, each with its own error:
// their owner asked for encryption, so they must not quietly go in clear.
func parseTargets(name string, data []byte) ([]Target, error) {
	ts, bad := parseLines(name, data)
	errs := make([]error, len(bad))
	for i, e := range bad {
		errs[i] = e
	}
	return ts, errors.Join(errs...)
}

// parseLines is parseTargets with each refused line on its own.
func parseLines(name string, data []byte) ([]Target, []*LineError) {
	data = bytes.TrimPrefix(data, []byte("\uFEFF")) // editors on Windows add a BOM
	var (
		targets []Target
		errs    []*LineError
		enc     *encryption
		encKey  string // the key, only to scrub it from detail text
		badEnc  int    // line of a bad BARK_ENCRYPTION setting in force; 0: none
		phone   string // the PHONE= setting in force; "": each target its own
	)
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line) // also drops a CRLF file's "\r"
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if value, ok := encryptionSetting(line); ok {
			e, err := parseEncryption(value)
			if err != nil {
				errs = append(errs, &LineError{File: name, Line: i + 1, Reason: err.Error()})
				enc, encKey, badEnc = nil, "", i+1
				continue
			}
			_, key, _ := strings.Cut(unquoteEnvValue(value), ":")
			enc, encKey, badEnc = e, key, 0
			continue
		}
		if value, ok := phoneSetting(line); ok {
			if !notify.ValidPhone(value) {
				errs = append(errs, &LineError{File: name, Line: i + 1, Reason: reasonPhone})
				continue
			}
			phone = value
			continue
		}
		if badEnc != 0 {
			errs = append(errs, &LineError{File: name, Line: i + 1, Reason: fmt.Sprintf("not loaded: the %s setting on line %d above it is bad, and this template must not go in clear", EncryptionKey, badEnc)})
			continue
		}
		t, reason := parseTemplate(line)
		if reason != "" {
			errs = append(errs, &LineError{File: name, Line: i + 1, Reason: reason})
			continue
		}
		t.File, t.Line, t.phone = name, i+1, phone
		if enc != nil {
			// The level is left out of the shape: each push brings its
			// own (passive unless told), and the template's, if it has one,
			// wins inside the ciphertext.
			shape, reason := shapeEncrypted(t.unleveled)
			if reason != "" {
				errs = append(errs, &LineError{File: name, Line: i + 1, Reason: reason})
				continue
			}
			t.enc, t.shape = enc, shape
			t.secrets = append(t.secrets, encKey)
		}
		targets = append(targets, t)
	}
	return targets, errs
}

// encryptionSetting returns the value of a BARK_ENCRYPTION=<value> line.
// A template never starts so: it starts with http.
func encryptionSetting(line string) (value string, ok bool) {
	k, v, ok := strings.Cut(line, "=")
	if !ok || strings.TrimSpace(k) != EncryptionKey {
		return "", false
	}
	return strings.TrimSpace(v), true
}

// PhoneKey starts a line naming whose phone the templates below it reach:
// "PHONE=alice". Targets of one phone, in any channel's files (ntfy's
// phone= option), share one storm budget.
const PhoneKey = "PHONE"

// phoneSetting returns the value of a PHONE=<name> line.
func phoneSetting(line string) (value string, ok bool) {
	k, v, ok := strings.Cut(line, "=")
	if !ok || strings.TrimSpace(k) != PhoneKey {
		return "", false
	}
	return strings.Trim(strings.TrimSpace(v), `"'`), true
}

// The reasons a line is rejected. They are fixed texts on purpose: nothing
// derived from the line (which holds a key) may reach an error.
const (
	reasonNoPlaceholder = "no $0 placeholder for the message"
	reasonBadChars      = "contains whitespace or control characters"
	reasonNotURL        = "not a valid URL"
	reasonScheme        = "not an http(s) URL"
	reasonNoHost        = "URL has no host"
	reasonFragment      = "URL has a #fragment, which is never sent to the server"
	reasonPlaceholderAt = "$0 must be in the URL's path or query"
	reasonLevelSyntax   = "URL has a malformed query"
	reasonNotConfigured = "not configured: replace " + examplePlaceholder + " with your Bark device key"
	reasonPhone         = "PHONE= " + notify.PhoneRule
)

// examplePlaceholder stands for the device key in .bark.env.example: a copy
// nobody edited must not pass for a configured phone.
const examplePlaceholder = "YOUR_DEVICE_KEY"

// parseTemplate validates one template line. It returns a reason instead of
// an error so that no library error, which may quote the URL, can escape.
func parseTemplate(line string) (Target, string) {
	if strings.Contains(line, examplePlaceholder) {
		return Target{}, reasonNotConfigured
	}
	if !strings.Contains(line, Placeholder) {
		return Target{}, reasonNoPlaceholder
	}
	if strings.IndexFunc(line, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return Target{}, reasonBadChars
	}
	u, err := url.Parse(strings.ReplaceAll(line, Placeholder, probe))
	if err != nil {
		return Target{}, reasonNotURL
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return Target{}, reasonScheme
	}
	if u.Host == "" || u.Opaque != "" {
		return Target{}, reasonNoHost
	}
	if u.Fragment != "" || strings.Contains(line, "#") {
		return Target{}, reasonFragment
	}
	if strings.Contains(u.Host, probe) || strings.Contains(u.User.String(), probe) {
		return Target{}, reasonPlaceholderAt
	}
	if _, err := url.ParseQuery(u.RawQuery); err != nil {
		return Target{}, reasonLevelSyntax
	}

	// Silent and not archived, unless the template chose otherwise, in any
	// spelling: bark-server lowercases query keys and the last one wins, so
	// an appended level=passive would override a template's Level=active.
	tmpl := appendMissingParams(line, queryParam{"level", LevelPassive}, queryParam{"isArchive", "0"})
	sum := sha256.Sum256([]byte(line))
	return Target{
		tmpl:      tmpl,
		unleveled: appendMissingParams(line, queryParam{"isArchive", "0"}),
		ownLevel:  templateSets(line)["level"],
		id:        hex.EncodeToString(sum[:8]),
		host:      u.Host,
		secrets:   secretParts(u),
	}, ""
}

// secretParts lists the pieces of a template that could be a key: path
// segments, query values and the password. Short pieces are left out since
// scrubbing "api" or "push" from a message protects nothing.
func secretParts(u *url.URL) []string {
	var parts []string
	add := func(s string) {
		if len(s) >= 6 && !strings.Contains(s, probe) {
			parts = append(parts, s)
		}
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		add(seg)
		if un, err := url.PathUnescape(seg); err == nil && un != seg {
			add(un)
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			add(v)
		}
	}
	if u.User != nil {
		add(u.User.Username())
		if p, ok := u.User.Password(); ok {
			add(p)
		}
	}
	return parts
}

// Identity is a hash of the target's template line: what the bridge's dedup
// memory knows the target by, so a reload that renumbers lines keeps it.
func (t Target) Identity() string { return t.id }

// Phone is whose phone the target reaches, the key of its storm budget:
// the PHONE= setting above it ("phone alice"), or, without one, the
// target's own file:line.
func (t Target) Phone() string {
	if t.phone != "" {
		return notify.Phone(t.phone)
	}
	return t.Name()
}
