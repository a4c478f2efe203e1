package ntfy

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// redacted replaces a secret wherever one is found.
const redacted = "<redacted>"

// anyToken is an ntfy access token anywhere in a text ("tk_" and 29
// lowercase letters and digits): a second line of defence for a token no
// target of this process holds (another user's, quoted by a proxy).
var anyToken = regexp.MustCompile(`tk_[a-z0-9]{29}`)

// minSecretLen: shorter parts are not scrubbed, since replacing every "ab"
// in a message protects nothing and garbles the rest.
const minSecretLen = 3

// maxKnownSecrets bounds the process-wide list below; a real config has a
// few targets, each with a few forms of one credential.
const maxKnownSecrets = 4096

// knownSecrets are the credentials, in every form sent, of every target
// loaded in this process. A server that answers one target may quote
// another's (a shared proxy, a shared log), so each target's scrub uses
// them all, and Scrub offers them to text lavender did not produce itself.
// Targets removed by a reload stay in the list: their credentials are no
// less secret for it.
var knownSecrets struct {
	mu       sync.RWMutex
	set      map[string]struct{}
	replacer *strings.Replacer
}

// rememberSecrets adds the targets' secrets to knownSecrets.
func rememberSecrets(ts []Target) {
	knownSecrets.mu.Lock()
	defer knownSecrets.mu.Unlock()
	if knownSecrets.set == nil {
		knownSecrets.set = make(map[string]struct{})
	}
	n := 0
	for _, t := range ts {
		n += len(t.secrets)
	}
	if len(knownSecrets.set)+n > maxKnownSecrets {
		// Only a fuzzer or a test loads thousands of targets; keep the
		// newest rather than grow without bound. Each target still
		// scrubs its own.
		clear(knownSecrets.set)
	}
	added := false
	for _, t := range ts {
		for _, s := range t.secrets {
			if _, ok := knownSecrets.set[s]; !ok && len(s) >= minSecretLen {
				knownSecrets.set[s] = struct{}{}
				added = true
			}
		}
	}
	if !added && knownSecrets.replacer != nil {
		return
	}
	// Longest first, so a credential is replaced whole before a part of it.
	parts := make([]string, 0, len(knownSecrets.set))
	for s := range knownSecrets.set {
		parts = append(parts, s)
	}
	slices.SortFunc(parts, func(a, b string) int {
		if c := cmp.Compare(len(b), len(a)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	pairs := make([]string, 0, 2*len(parts))
	for _, s := range parts {
		pairs = append(pairs, s, redacted)
	}
	knownSecrets.replacer = strings.NewReplacer(pairs...)
}

// Scrub removes from s every credential of a target loaded in this
// process and anything shaped like an ntfy access token. It is the last
// line of defence for text lavender did not produce itself (a library's
// error, the standard log package); a log handler may call it.
func Scrub(s string) string {
	knownSecrets.mu.RLock()
	r := knownSecrets.replacer
	knownSecrets.mu.RUnlock()
	if r != nil {
		s = r.Replace(s)
	}
	return anyToken.ReplaceAllString(s, redacted)
}

// scrub removes the target's own credential, in every form it was sent,
// then every other known one (Scrub), from s.
func (t Target) scrub(s string) string {
	for _, p := range t.secrets {
		if len(p) >= minSecretLen {
			s = strings.ReplaceAll(s, p, redacted)
		}
	}
	return Scrub(s)
}
