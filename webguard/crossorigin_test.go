package webguard

import (
	"net/http"
	"testing"
)

// TestGuardSameSite: a page on another port of this host (a notebook
// server, Grafana) is same-site but not same-origin; net/http's
// CrossOriginProtection refuses it, where the hand-written check let
// anything but "cross-site" through.
func TestGuardSameSite(t *testing.T) {
	r := newRig(t, Config{WriteAllow: mustPrefixes(t, "127.0.0.0/8")})
	r.check(t, reqCase{name: "same-site", method: "POST", path: "/-/reload", header: map[string]string{"Sec-Fetch-Site": "same-site"}, code: 403, want: "Sec-Fetch-Site: same-site"})
	r.check(t, reqCase{name: "none (typed by the user)", method: "POST", path: "/-/reload", header: map[string]string{"Sec-Fetch-Site": "none"}, code: 200})
}

// TestGuardTrustsTheExternalURL: behind a reverse proxy at
// --web.external-url that passes on its own Host, an older browser's
// Origin is the external URL's, and the write is lavender's own page's.
func TestGuardTrustsTheExternalURL(t *testing.T) {
	r := newRig(t, Config{WriteAllow: mustPrefixes(t, "127.0.0.0/8"), ExternalURL: "https://lav.example:9110/"})
	r.check(t, reqCase{name: "external origin", method: "POST", path: "/-/reload", header: map[string]string{"Origin": "https://lav.example:9110"}, code: 200})
	r.check(t, reqCase{name: "another origin", method: "POST", path: "/-/reload", header: map[string]string{"Origin": "https://lav.example:9111"}, code: 403, want: "is not this server"})
}

func TestNewRefusesABadExternalURL(t *testing.T) {
	if _, err := New(http.NotFoundHandler(), Config{ExternalURL: "lav.example/x"}); err == nil {
		t.Error("New took an external URL without a scheme")
	}
}
