package ntfy

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
	"github.com/lavender-ml/lavender/internal/targetfile"
	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/notify"
)

const (
	// ConfigSuffix is how an ntfy target file's name ends.
	ConfigSuffix = ".ntfy.env"

	// maxConfigFileBytes bounds one target file; a real one is a few lines.
	maxConfigFileBytes = 1 << 20
	// maxSecretFileBytes bounds a token or password file: a token is 32
	// bytes, and a file much larger than a password is not one.
	maxSecretFileBytes = 4 << 10
	// maxTitleOption bounds title=, which every push of the target shows.
	maxTitleOption = 200
)

// Sequence modes: whether a push carries X-Sequence-ID, ntfy's key for
// replacing and deleting an earlier notification (ntfy 2.16 and later).
const (
	// SequenceAuto sends the header and learns from each answer whether
	// the server kept it (a 2.16+ answer carries sequence_id); an older
	// server ignores the header.
	SequenceAuto = "auto"
	SequenceOn   = "on"  // the server is known to be 2.16+: deletes are sent without asking
	SequenceOff  = "off" // never: every push is a new notification, deletes send nothing
)

// topicRegex is ntfy's own rule for a topic name (server.go topicRegex).
var topicRegex = lazyregexp.New(`^[-_A-Za-z0-9]{1,64}$`)

// envNameRegex is what token_env= and password_env= may name: a POSIX
// shell variable, so that nothing else (a token pasted there) is accepted.
var envNameRegex = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// Target is one ntfy topic from a *.ntfy.env file and how to authenticate
// to its server. Its token or password was read when it was loaded, so a
// Target prints, formats and logs as "file:line" only.
type Target struct {
	File string // base name of the file, e.g. "phone.ntfy.env"
	Line int    // 1-based line number

	server   string // scheme://host[:port][/base path], no trailing slash
	topic    string
	sequence string // SequenceAuto, SequenceOn or SequenceOff
	title    string // title= option: the title of every push; "": the message's
	phone    string // phone= option: whose phone it reaches; "": its own
	// authorization is the Authorization header's value ("Bearer tk_…",
	// "Basic …"), or "" for an open topic. It never leaves the request.
	authorization string
	authKind      string   // "token", "basic" or "" (none): for `check` output
	id            string   // hash of server, topic and where the credential comes from
	secrets       []string // every form of the credential, to scrub from any detail text
}

// Name is the target's public name, "file:line". It is what metrics, logs
// and HTTP answers use, never the credential.
func (t Target) Name() string { return t.File + ":" + strconv.Itoa(t.Line) }

// Host is the ntfy server's host[:port], which is not secret and helps
// `check` output.
func (t Target) Host() string {
	u, err := url.Parse(t.server)
	if err != nil {
		return ""
	}
	return u.Host
}

// Topic is the topic's name. Anyone who knows an open topic's name can
// read it, but it is the user's to show, like a host name, and the phone
// app shows it too.
func (t Target) Topic() string { return t.topic }

// Sequence is the target's sequence mode: SequenceAuto, SequenceOn or
// SequenceOff.
func (t Target) Sequence() string { return t.sequence }

// Auth is how the target authenticates: "token", "basic" or "" (none).
// Never the credential.
func (t Target) Auth() string { return t.authKind }

// Identity is a hash of the server, the topic and where the credential
// comes from (the token file's path, the variable's name, the user's name),
// never the credential itself: a rotated token keeps the identity, so the
// dedup memory survives a reload that picks up the rotation.
func (t Target) Identity() string { return t.id }

// Phone is whose phone the target reaches, the key of its storm budget:
// the phone= option ("phone alice"), shared with every target of that
// name in any channel's files, or, without one, its own file:line.
func (t Target) Phone() string {
	if t.phone != "" {
		return notify.Phone(t.phone)
	}
	return t.Name()
}

// String, GoString, Format and LogValue keep the credential out of %v, %+v,
// %#v, every other verb, and slog.
func (t Target) String() string { return t.Name() }

// GoString implements fmt.GoStringer.
func (t Target) GoString() string { return "ntfy.Target(" + t.Name() + ")" }

// Format implements fmt.Formatter: every verb prints the name, so that no
// verb (%d, %x) reaches the fields.
func (t Target) Format(f fmt.State, verb rune) { textsafe.FormatAs(f, verb, t.Name(), t.GoString()) }

// LogValue implements slog.LogValuer.
func (t Target) LogValue() slog.Value { return slog.StringValue(t.Name()) }

// LoadResult is what LoadTargets found.
type LoadResult struct {
	Targets  []Target
	Bad      []*LineError // every line refused, in file and line order
	Files    []string     // every *.ntfy.env file read, base names, sorted
	Warnings []string     // e.g. a file readable by group or others
}

// LineError is a line of a target file that was refused: "phone.ntfy.env:7:
// token_file: the file does not exist". Reason is a fixed text (with the
// names of options at most), never any part of the line's values, which
// may hold a credential pasted in the wrong place.
type LineError = targetfile.LineError

// Report is one line per target line, good and bad alike, in file and line
// order: "phone.ntfy.env:3 ok (ntfy.sh, topic alerts, token, sequence auto)"
// or "phone.ntfy.env:7: …". What a `check` prints: one bad line must not
// hide the good ones.
func (r LoadResult) Report() []string {
	lines := make([]targetfile.Line, 0, len(r.Targets))
	for _, t := range r.Targets {
		auth := t.authKind
		if auth == "" {
			auth = "no auth"
		}
		detail := t.Host() + ", topic " + t.topic + ", " + auth + ", sequence " + t.sequence
		lines = append(lines, targetfile.Line{File: t.File, Line: t.Line, Text: t.Name() + " ok (" + detail + ")"})
	}
	return targetfile.Report(lines, r.Bad)
}

// ConfigDirError is a LoadTargets failure of the directory itself, as
// opposed to bad lines in its files.
type ConfigDirError = targetfile.DirError

// LoadTargets reads every *.ntfy.env file in dir. Each non-blank line not
// starting with "#" is a topic URL and its options (see parseLine). Token
// and password files and variables are read now, so a reload picks up a
// rotated token. Errors name file:line and never a value of the line; all
// bad lines are reported together. The good targets are returned even
// then; a failure of dir itself is a *ConfigDirError and returns none.
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
		res.Files = append(res.Files, name)
		p := parser{dir: dir, file: name}
		p.parse(data)
		if perm&0o044 != 0 && p.holdsSecrets {
			// Only a file with a credential in it is worth a warning; a
			// file naming an open topic and a token file is not, though
			// the token file is.
			res.Warnings = append(res.Warnings, fmt.Sprintf(
				"%s is readable by group or others (mode %04o) but its topics are private; run chmod 600 on it", name, perm))
		}
		res.Warnings = append(res.Warnings, p.warnings...)
		res.Targets = append(res.Targets, p.targets...)
		res.Bad = append(res.Bad, p.bad...)
		for _, e := range p.bad {
			errs = append(errs, e)
		}
	}
	rememberSecrets(res.Targets)
	return res, errors.Join(errs...)
}

// parseTargets parses one file's content as LoadTargets does, relative
// paths in it taken from dir.
func parseTargets(dir, name string, data []byte) ([]Target, error) {
	p := parser{dir: dir, file: name}
	p.parse(data)
	rememberSecrets(p.targets)
	errs := make([]error, len(p.bad))
	for i, e := range p.bad {
		errs[i] = e
	}
	return p.targets, errors.Join(errs...)
}

// The reasons a line is refused. They are fixed texts on purpose: nothing
// taken from the line, which may hold a credential written in the wrong
// place, reaches an error.
const (
	reasonBadChars      = "contains control characters"
	reasonNotURL        = "not a valid URL"
	reasonScheme        = "not an http(s) URL"
	reasonNoHost        = "URL has no host"
	reasonUserinfo      = "URL holds a user or password: use user= with password_file= or password_env="
	reasonAuthQuery     = "URL holds ?auth=, which servers and proxies log: use token_file= or token_env="
	reasonQuery         = "URL has a query: options go after the URL as key=value"
	reasonFragment      = "URL has a #fragment, which is never sent to the server"
	reasonNoTopic       = "URL has no topic: write the topic as the URL's path, https://ntfy.sh/my-topic"
	reasonTopic         = "the topic must be 1 to 64 letters, digits, - or _"
	reasonNotOption     = "is not key=value"
	reasonUnknown       = "is not a known option (token_file, token_env, user, password_file, password_env, sequence, title)"
	reasonRepeated      = "is given twice"
	reasonInlineToken   = "token= would keep the token in this file's line: put it in a file (token_file=) or a variable (token_env=)"
	reasonInlinePass    = "password= would keep the password in this file's line: use password_file= or password_env="
	reasonTwoAuths      = "give either a token (token_file=, token_env=) or a user and password, not both"
	reasonTwoSources    = "give the secret once: a file or a variable, not both"
	reasonUserNoPass    = "user= needs password_file= or password_env="
	reasonPassNoUser    = "password_file= and password_env= need user="
	reasonUserChars     = "user= must not be empty or hold ':', spaces or control characters"
	reasonSequence      = "sequence= must be auto, on or off"
	reasonTitle         = "title= must be at most 200 bytes of text"
	reasonPhone         = "phone= " + notify.PhoneRule
	reasonNotConfigured = "not configured: replace " + ExamplePlaceholder + " with a topic of your own"
	reasonQuote         = "has an unterminated quote"
	reasonEnvName       = "must name a variable: letters, digits and _, not starting with a digit"
	reasonEnvUnset      = "names a variable that is not set"
	reasonFileMissing   = "the file does not exist"
	reasonFileUnread    = "the file cannot be read"
	reasonFileNotFile   = "is not a regular file"
	reasonFileTooLarge  = "the file is larger than 4096 bytes"
	reasonEmptySecret   = "is empty"
	reasonSecretChars   = "holds control characters, or a token holds spaces"
	reasonSecretInPlace = "looks like a token itself: give the path of a file holding it"
)

// parser parses one target file.
type parser struct {
	dir, file    string
	targets      []Target
	bad          []*LineError
	warnings     []string
	holdsSecrets bool // a line names a credential: the file's mode matters
}

func (p *parser) parse(data []byte) {
	data = bytes.TrimPrefix(data, []byte("\uFEFF")) // editors on Windows add a BOM
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line) // also drops a CRLF file's "\r"
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t, reason := p.parseLine(line)
		if reason != "" {
			p.bad = append(p.bad, &LineError{File: p.file, Line: i + 1, Reason: reason})
			continue
		}
		t.File, t.Line = p.file, i+1
		if host := targetfile.InClearTo(t.server); host != "" && t.authKind != "" {
			p.warnings = append(p.warnings, fmt.Sprintf(
				"%s sends its %s over plain http to %s, where anyone on the way can read it; use https", t.Name(), credentialWord[t.authKind], host))
		}
		p.targets = append(p.targets, t)
	}
}

// credentialWord names a target's credential by its auth kind.
var credentialWord = map[string]string{"token": "access token", "basic": "password"}

// ExamplePlaceholder stands for the topic in .ntfy.env.example: a copy
// nobody edited must not push to a public topic everyone's copy shares.
const ExamplePlaceholder = "YOUR_TOPIC"

// options are a line's key=value options, as given.
type options map[string]string

// knownOptions are the option names a line may use.
var knownOptions = []string{"token_file", "token_env", "user", "password_file", "password_env", "sequence", "title", "phone"}

// parseLine parses one target line:
//
//	https://ntfy.sh/my-topic token_file=ntfy.token sequence=auto title="GPU box"
//
// The URL's path ends in the topic; what comes before it is the server's
// base path (an ntfy behind a proxy under /ntfy/). Options are separated by
// spaces; a value may be quoted with "" to hold spaces. It returns a reason
// instead of an error so that no library error, which may quote the line,
// can escape.
func (p *parser) parseLine(line string) (Target, string) {
	if strings.IndexFunc(line, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) >= 0 {
		return Target{}, reasonBadChars
	}
	fields, ok := splitFields(line)
	if !ok {
		return Target{}, "the line " + reasonQuote
	}
	opts, reason := parseOptions(fields[1:])
	if reason != "" {
		return Target{}, reason
	}
	server, topic, reason := parseTopicURL(fields[0])
	if reason != "" {
		return Target{}, reason
	}
	if topic == ExamplePlaceholder {
		return Target{}, reasonNotConfigured
	}
	t := Target{server: server, topic: topic, sequence: SequenceAuto}
	if v, ok := opts["sequence"]; ok {
		switch v {
		case SequenceAuto, SequenceOn, SequenceOff:
			t.sequence = v
		default:
			return Target{}, reasonSequence
		}
	}
	if v, ok := opts["title"]; ok {
		if v == "" || len(v) > maxTitleOption || strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return Target{}, reasonTitle
		}
		t.title = v
	}
	if v, ok := opts["phone"]; ok {
		if !notify.ValidPhone(v) {
			return Target{}, reasonPhone
		}
		t.phone = v
	}
	source, reason := p.credential(&t, opts)
	if reason != "" {
		return Target{}, reason
	}
	h := sha256.New()
	for _, part := range []string{t.server, t.topic, t.authKind, source} {
		h.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	t.id = hex.EncodeToString(h.Sum(nil)[:8])
	return t, ""
}

// splitFields splits a line at runs of spaces and tabs; a "…" quoted part
// of a field keeps its spaces and loses its quotes.
func splitFields(line string) ([]string, bool) {
	var (
		fields  []string
		cur     strings.Builder
		inField bool
		quoted  bool
	)
	for _, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
			inField = true
		case !quoted && (r == ' ' || r == '\t'):
			if inField {
				fields = append(fields, cur.String())
				cur.Reset()
				inField = false
			}
		default:
			cur.WriteRune(r)
			inField = true
		}
	}
	if quoted {
		return nil, false
	}
	if inField {
		fields = append(fields, cur.String())
	}
	return fields, len(fields) > 0
}

// parseOptions reads the key=value fields after the URL. A field is named
// in errors by its position and, once its key is known to be an option
// name, by the key: never by its value, nor by an unknown key (a token
// pasted alone would be one).
func parseOptions(fields []string) (options, string) {
	opts := options{}
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		pos := "option " + strconv.Itoa(i+1)
		if !ok {
			return nil, pos + " " + reasonNotOption
		}
		switch k {
		case "token", "auth":
			return nil, reasonInlineToken
		case "password", "pass":
			return nil, reasonInlinePass
		}
		if !slices.Contains(knownOptions, k) {
			return nil, pos + " " + reasonUnknown
		}
		if _, dup := opts[k]; dup {
			return nil, k + " " + reasonRepeated
		}
		opts[k] = v
	}
	return opts, ""
}

// parseTopicURL splits a topic URL into the server's base URL and the
// topic, refusing what would put a credential in a URL.
func parseTopicURL(s string) (server, topic, reason string) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Parse fails on a malformed user:password@ too; say which.
		if strings.Contains(s, "@") {
			return "", "", reasonUserinfo
		}
		return "", "", reasonNotURL
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", "", reasonScheme
	}
	if u.User != nil {
		return "", "", reasonUserinfo
	}
	if u.Host == "" || u.Opaque != "" {
		return "", "", reasonNoHost
	}
	// Any spelling of auth= in the query: ntfy reads query parameters
	// case-insensitively, and a malformed query is no excuse to keep it.
	if strings.Contains(strings.ToLower(u.RawQuery), "auth") {
		return "", "", reasonAuthQuery
	}
	if u.RawQuery != "" || u.ForceQuery {
		return "", "", reasonQuery
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return "", "", reasonFragment
	}
	path := u.EscapedPath()
	i := strings.LastIndex(path, "/")
	if i < 0 || path[i+1:] == "" {
		return "", "", reasonNoTopic
	}
	topic = path[i+1:]
	if !topicRegex.MatchString(topic) {
		return "", "", reasonTopic
	}
	base := path[:i]
	server = u.Scheme + "://" + u.Host + base
	return server, topic, ""
}

// credential reads the target's token or password from where the options
// say, and returns a name for where it came from (for the identity).
func (p *parser) credential(t *Target, opts options) (source, reason string) {
	tokenFile, hasTokenFile := opts["token_file"]
	tokenEnv, hasTokenEnv := opts["token_env"]
	user, hasUser := opts["user"]
	passFile, hasPassFile := opts["password_file"]
	passEnv, hasPassEnv := opts["password_env"]
	hasToken := hasTokenFile || hasTokenEnv
	hasPass := hasPassFile || hasPassEnv
	switch {
	case hasToken && (hasUser || hasPass):
		return "", reasonTwoAuths
	case hasTokenFile && hasTokenEnv, hasPassFile && hasPassEnv:
		return "", reasonTwoSources
	case hasUser && !hasPass:
		return "", reasonUserNoPass
	case hasPass && !hasUser:
		return "", reasonPassNoUser
	}
	if hasToken || hasUser {
		p.holdsSecrets = true
	}
	switch {
	case hasTokenFile:
		token, reason := p.readSecret("token_file", tokenFile)
		if reason != "" {
			return "", reason
		}
		t.setToken(token)
		return "file:" + p.resolve(tokenFile), ""
	case hasTokenEnv:
		token, reason := readEnvSecret("token_env", tokenEnv)
		if reason != "" {
			return "", reason
		}
		t.setToken(token)
		return "env:" + tokenEnv, ""
	case hasUser:
		if user == "" || strings.ContainsAny(user, ": \t") || strings.IndexFunc(user, unicode.IsControl) >= 0 {
			return "", reasonUserChars
		}
		var pass string
		if hasPassFile {
			pass, reason = p.readSecret("password_file", passFile)
		} else {
			pass, reason = readEnvSecret("password_env", passEnv)
		}
		if reason != "" {
			return "", reason
		}
		t.setBasic(user, pass)
		return "user:" + user, ""
	}
	return "", ""
}

// resolve makes a relative path relative to the config dir, so a target
// file and its token file can sit side by side whatever the service's
// working directory.
func (p *parser) resolve(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(p.dir, path)
}

// readSecret reads a token or password file: one line, surrounding
// whitespace dropped. A file others may read is a warning, as for the
// target files.
func (p *parser) readSecret(option, path string) (string, string) {
	if path == "" {
		return "", option + " " + reasonEmptySecret
	}
	if looksLikeToken(path) {
		return "", option + " " + reasonSecretInPlace
	}
	data, perm, err := targetfile.Read(p.resolve(path), maxSecretFileBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", option + ": " + reasonFileMissing
	case err != nil && strings.Contains(err.Error(), "larger than"):
		return "", option + ": " + reasonFileTooLarge
	case err != nil:
		return "", option + ": " + reasonFileUnread
	case data == nil:
		return "", option + " " + reasonFileNotFile
	}
	if perm&0o044 != 0 {
		p.warnings = append(p.warnings, fmt.Sprintf(
			"the %s of a target in %s is readable by group or others (mode %04o); run chmod 600 on it", option, p.file, perm))
	}
	return checkSecret(option, string(data))
}

// readEnvSecret reads a token or password from the environment.
func readEnvSecret(option, name string) (string, string) {
	if looksLikeToken(name) {
		return "", option + " " + reasonSecretInPlace
	}
	if !envNameRegex.MatchString(name) {
		return "", option + " " + reasonEnvName
	}
	v, ok := os.LookupEnv(name)
	if !ok {
		return "", option + " " + reasonEnvUnset
	}
	return checkSecret(option, v)
}

// checkSecret trims a secret and refuses one that is empty or could break
// the header it goes into: a token is one word; a password may hold
// spaces (it travels base64-encoded) but no control characters.
func checkSecret(option, s string) (string, string) {
	s = strings.TrimSpace(strings.TrimPrefix(s, "\uFEFF"))
	if s == "" {
		return "", option + ": the secret " + reasonEmptySecret
	}
	bad := func(r rune) bool { return unicode.IsControl(r) }
	if strings.HasPrefix(option, "token") {
		bad = func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }
	}
	if strings.IndexFunc(s, bad) >= 0 {
		return "", option + ": the secret " + reasonSecretChars
	}
	return s, ""
}

// looksLikeToken: ntfy's access tokens are "tk_" and 29 lowercase letters
// and digits. A value where a path or a name belongs that looks like one is
// refused without repeating it.
func looksLikeToken(s string) bool { return tokenRegex.MatchString(s) }

var tokenRegex = lazyregexp.New(`^tk_[a-z0-9]{20,}$`)

// setToken makes the target authenticate with an access token.
func (t *Target) setToken(token string) {
	t.authKind = "token"
	t.authorization = "Bearer " + token
	t.secrets = []string{t.authorization, token}
}

// setBasic makes the target authenticate with a user and password.
func (t *Target) setBasic(user, pass string) {
	enc := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	t.authKind = "basic"
	t.authorization = "Basic " + enc
	// The password is scrubbed as given and in every base64 form a
	// server could quote, so a quoted header leaks nothing either way.
	t.secrets = []string{t.authorization, enc, strings.TrimRight(enc, "="), pass}
}
