package bark

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// FuzzBarkEnv: parsing any file never panics, an error says only file:line
// and a fixed reason, and every accepted target builds a URL that parses,
// keeps the message in one piece, and ends up silent unless told otherwise.
func FuzzBarkEnv(f *testing.F) {
	f.Add("https://api.day.app/KEY/$0\n# comment\n\nhttp://bark.local:8080/KEY/$0?level=active", "swap 54% full (16.3/32.0 GB) — a/b+c#d?e&f")
	f.Add("\uFEFFhttps://a/$0?\r\nhttps://a/$0?x=1&\n", "")
	f.Add("https://$0/\nftp://x/$0\nhttps://x/%zz/$0\nhttps://x/$0#f", "%")
	f.Add("https://u:p@h/$0$0?isArchive=1", "\xff\x00")
	f.Add("BARK_ENCRYPTION=aes-128-cbc:0123456789abcdef\nhttps://h/K/$0?title=T\nhttps://h/K/t/$0\nhttps://h/p/push?device_key=K&body=$0\nhttps://h/K/$0?iv=x", "m")

	reasons := []string{reasonNoPlaceholder, reasonBadChars, reasonNotURL, reasonScheme,
		reasonNoHost, reasonFragment, reasonPlaceholderAt, reasonLevelSyntax, reasonNotConfigured,
		reasonEncryptedPath, reasonEncryptedCipher}
	// A bad BARK_ENCRYPTION setting has texts of its own (with lengths and
	// algorithm names, never the value), and the templates under it are
	// "not loaded".
	errLine := regexp.MustCompile(`^f\.bark\.env:[0-9]+: (` + strings.Join(quoteAll(reasons), "|") + `|` + EncryptionKey + `[ :].*|not loaded: .*)$`)

	f.Fuzz(func(t *testing.T, content, msg string) {
		ts, err := parseTargets("f.bark.env", []byte(content))
		if err != nil {
			for _, l := range strings.Split(err.Error(), "\n") {
				if !errLine.MatchString(l) {
					t.Fatalf("error line %q is not file:line: reason", l)
				}
			}
		}
		for _, tg := range ts {
			raw := fillMessage(tg.tmpl, msg)
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatalf("target %s: built URL does not parse", tg)
			}
			if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
				t.Fatalf("target %s: scheme %q host %q", tg, u.Scheme, u.Host)
			}
			// Keys as bark-server reads them: lowercased, so a template's
			// own "Level" is the level.
			q := templateParams(raw)
			if _, ok := q["level"]; !ok {
				t.Fatalf("target %s: query %q lacks level", tg, u.RawQuery)
			}
			if _, ok := q["isarchive"]; !ok {
				t.Fatalf("target %s: query %q lacks isArchive", tg, u.RawQuery)
			}
			if strings.ContainsAny(raw, " \n\r\t#") {
				t.Fatalf("target %s: raw URL has whitespace or #", tg)
			}
			esc := escapeMessage(msg)
			if back, err := url.QueryUnescape(esc); err != nil || back != msg { // what bark-server applies
				t.Fatalf("escaped message does not round-trip: %q -> %q -> %q", msg, esc, back)
			}
			if strings.Contains(tg.String()+tg.GoString(), "://") {
				t.Fatalf("target prints its URL: %s", tg)
			}
		}
	})
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = regexp.QuoteMeta(s)
	}
	return out
}
