package bark

import (
	"strings"

	"github.com/lavender-ml/lavender/internal/lazyregexp"
	"github.com/lavender-ml/lavender/notify"
)

// redacted replaces a secret wherever one is found.
const redacted = notify.Redacted

// apnsToken matches an APNs device token in the path bark-server posts to
// (https://api.push.apple.com/3/device/<token>), which it quotes in its 500
// answer. A token is 32 bytes today, hex-encoded; Apple allows longer ones.
var apnsToken = lazyregexp.New(`/3/device/[0-9A-Fa-f]{64,}`)

// knownSecrets are the secret parts of every target loaded from a file in
// this process: Scrub and the logger's scrub use them for text that did
// not pass through a Target's own scrub.
var knownSecrets notify.Secrets

// rememberSecrets adds the targets' secret parts to knownSecrets.
func rememberSecrets(ts []Target) {
	for _, t := range ts {
		knownSecrets.Remember(t.secrets)
	}
}

// Scrub removes from s every secret part of a target loaded in this process
// and every APNs device token. It is the last line of defence for text
// lavender did not produce itself.
func Scrub(s string) string { return scrubAPNs(knownSecrets.Replace(s)) }

func scrubAPNs(s string) string {
	if !strings.Contains(s, "/3/device/") {
		return s
	}
	return apnsToken.ReplaceAllString(s, "/3/device/"+redacted)
}
