package bark

import (
	"net/url"
	"strings"
)

// serverOnlyParams never go from a template into an encrypted push's
// plaintext: bark-server alone reads them (delete makes a background push
// with no message), or they are the encryption itself. A template's id goes
// both ways, like p.ID: the server needs it, and so does the app's archive.
var serverOnlyParams = map[string]bool{
	"delete": true, "device_key": true, "device_keys": true, "ciphertext": true, "iv": true,
}

// encryptedRequest builds an encrypted push for one URL template. It
// returns the URL to POST to and the form to POST (ciphertext and iv), so
// the request line carries the template with $0 replaced by a fixed word
// (encryptedPathBody), the device key and the id, and nothing of the
// message; bark-server reads a POST form on every push route.
//
// The plaintext is the JSON of p with lowercased keys, as the app reads
// them. The template's own query parameters go into it as well, and win
// over p, as they do in a clear push: the app replaces a decrypted push's
// parameters with the decrypted JSON, so a template's level, group, sound
// or icon left only in the clear query would be lost. A template value
// holding $0 gets the message there (?title=$0 puts it in the title), and
// then the message is not also the body unless the template says so.
// The id (the template's own, else p.ID) goes into the URL and into the
// plaintext; delete and the encryption's own parameters never enter it.
func (e *encryption) encryptedRequest(tmpl string, p pushParams) (reqURL string, form url.Values, err error) {
	plain := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			plain[k] = v
		}
	}
	set("title", p.Title)
	set("level", p.Level)
	set("isarchive", p.IsArchive)
	set("group", p.Group)
	set("url", p.URL)
	set("id", p.ID)
	own := templateParams(tmpl)
	messageInQuery := false
	for _, v := range own {
		if strings.Contains(v, Placeholder) {
			messageInQuery = true
		}
	}
	if !messageInQuery {
		set("body", p.Body)
	}
	for k, v := range own {
		if serverOnlyParams[k] || k == "" {
			continue
		}
		plain[k] = strings.ReplaceAll(v, Placeholder, p.Body)
	}

	s, err := e.encryptJSON(plain)
	if err != nil {
		return "", nil, err
	}
	reqURL = encryptedTemplate(tmpl)
	if p.ID != "" {
		reqURL = appendMissingParams(reqURL, queryParam{"id", p.ID})
	}
	return reqURL, s.Values(), nil
}
