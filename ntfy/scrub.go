package ntfy

import (
	"strings"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
	"github.com/lavender-ml/lavender/notify"
)

// redacted replaces a secret wherever one is found.
const redacted = notify.Redacted

// anyToken is an ntfy access token anywhere in a text ("tk_" and 29
// lowercase letters and digits): a second line of defence for a token no
// target of this process holds (another user's, quoted by a proxy).
var anyToken = lazyregexp.New(`tk_[a-z0-9]{29}`)

// minSecretLen: shorter parts are not scrubbed, since replacing every "ab"
// in a message protects nothing and garbles the rest.
const minSecretLen = 3

// knownSecrets are the credentials, in every form sent, of every target
// loaded in this process. A server that answers one target may quote
// another's (a shared proxy, a shared log), so each target's scrub uses
// them all, and Scrub offers them to text lavender did not produce itself.
var knownSecrets = notify.Secrets{MinLen: minSecretLen}

// rememberSecrets adds the targets' secrets to knownSecrets.
func rememberSecrets(ts []Target) {
	for _, t := range ts {
		knownSecrets.Remember(t.secrets)
	}
}

// Scrub removes from s every credential of a target loaded in this
// process and anything shaped like an ntfy access token. It is the last
// line of defence for text lavender did not produce itself (a library's
// error, the standard log package); the logger calls it.
func Scrub(s string) string {
	return anyToken.ReplaceAllString(knownSecrets.Replace(s), redacted)
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
