package bark

import (
	"net/url"
	"strings"
)

// What an encrypted push leaves in clear, and why: bark-server reads these
// itself, and the app never sees the request.
//   - the device key (the path's first segment, or device_key=): the server
//     looks up the phone by it;
//   - id: the server makes it the APNs collapse id, so a later push replaces
//     the notification; it is repeated inside, since the app keys its
//     archive by the id it decrypts;
//   - delete=1 (a delete push carries no text at all) and device_keys;
//   - the fixed word "encrypted" as the alert body, which the app replaces
//     with the decrypted message (only an app that cannot decrypt shows it);
//   - the host, the request's size and its time.
//
// Everything the app reads (title, subtitle, body, level, isArchive, group,
// url, sound, icon, …) goes into the ciphertext only, the template's own
// values included: the app replaces a decrypted push's parameters with the
// decrypted ones, so a value left in the clear query would be lost anyway.
var clearParams = map[string]bool{"device_key": true, "device_keys": true, "delete": true}

// The reasons an encrypted target's template is refused. Fixed texts, like
// the other reasons: nothing of the line may reach an error.
const (
	reasonEncryptedCipher = "sets ciphertext or iv itself, which " + EncryptionKey + " sets: remove them from the template"
	reasonEncryptedPath   = "with " + EncryptionKey + " the template must be https://host/<device key>/$0 (a title goes in the query, ?title=…, and so into the ciphertext): " +
		"a path segment between the key and $0 would reach bark-server in clear; for a server under a URL prefix write https://host/<prefix>/push?device_key=<key>&body=$0"
)

// encryptedShape is an encrypted target's template taken apart once, when
// it is loaded: the URL that goes in clear, and the template's own
// parameters, which go into the ciphertext.
type encryptedShape struct {
	clearURL string       // origin, path and clear query (device_key), no id yet
	ownID    string       // the template's own id, which wins over the push's
	own      []queryParam // the template's parameters for the plaintext, lowercased keys, $0 in place
	// messageOwn: the template puts $0 in one of its own parameters (or
	// the path's body), so the message is not also sent as the body.
	messageOwn bool
}

// shapeEncrypted takes tmpl (a checked template, with level and isArchive
// appended) apart for encryption, or gives the reason it cannot be sent
// encrypted without leaving something the app reads in clear.
func shapeEncrypted(tmpl string) (encryptedShape, string) {
	var s encryptedShape
	scheme, rest, _ := strings.Cut(tmpl, "://")
	cut := strings.IndexAny(rest, "/?")
	if cut < 0 {
		return s, reasonNoPlaceholder
	}
	origin, rest := scheme+"://"+rest[:cut], rest[cut:]
	path, query, _ := strings.Cut(rest, "?")

	var clearQuery []string
	hasKeyParam := false
	for _, pair := range strings.Split(query, "&") {
		if pair == "" {
			continue
		}
		rk, rv, _ := strings.Cut(pair, "=")
		k, v := strings.ToLower(lenientUnescape(rk)), lenientUnescape(rv)
		switch {
		case k == "ciphertext" || k == "iv":
			return s, reasonEncryptedCipher
		case k == "id":
			s.ownID = v
		case clearParams[k]:
			clearQuery = append(clearQuery, pair)
			hasKeyParam = hasKeyParam || k == "device_key"
			continue
		case k == "":
			continue
		}
		if strings.Contains(v, Placeholder) {
			s.messageOwn = true
		}
		s.own = append(s.own, queryParam{k, v})
	}

	segs := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(segs) == 2 && segs[0] != "" && !strings.Contains(segs[0], Placeholder) && strings.Contains(segs[1], Placeholder):
		// /<key>/$0: the message is the body, as the server would read it.
		body, err := url.QueryUnescape(strings.ReplaceAll(segs[1], Placeholder, probe))
		if err != nil {
			return s, reasonNotURL
		}
		s.own = append([]queryParam{{"body", strings.ReplaceAll(body, probe, Placeholder)}}, s.own...)
		s.messageOwn = true
		path = "/" + segs[0] + "/" + encryptedPathBody
	case len(segs) == 1 && segs[0] != "" && !strings.Contains(segs[0], Placeholder) && !hasKeyParam:
		// /<key>?body=$0
		path = "/" + segs[0] + "/" + encryptedPathBody
	case hasKeyParam && segs[len(segs)-1] == "push" && !strings.Contains(path, Placeholder):
		// /<prefix>/push?device_key=<key>&body=$0: the key in clear, in the query.
	default:
		return s, reasonEncryptedPath
	}
	if !s.messageOwn {
		return s, reasonEncryptedPath // $0 only where it would go in clear
	}
	s.clearURL = origin + path
	if len(clearQuery) > 0 {
		s.clearURL += "?" + strings.Join(clearQuery, "&")
	}
	return s, ""
}

// encryptedRequest builds an encrypted push. It returns the URL to POST to
// and the form to POST (ciphertext and iv): the URL holds only what
// clearParams and the comment above it list, and the id.
//
// The plaintext is the JSON of p with lowercased keys, as the app reads
// them, and the template's own parameters, which win over p as they do in
// a clear push. A template value holding $0 gets the message there
// (?title=$0 puts it in the title), and then the message is not also the
// body unless the template says so.
func (e *encryption) encryptedRequest(s encryptedShape, p pushParams) (reqURL string, form url.Values, err error) {
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
	id := p.ID
	if s.ownID != "" {
		id = s.ownID
	}
	set("id", id)
	if !s.messageOwn {
		set("body", p.Body)
	}
	for _, kv := range s.own {
		plain[kv.Key] = strings.ReplaceAll(kv.Value, Placeholder, p.Body)
	}

	sealed, err := e.encryptJSON(plain)
	if err != nil {
		return "", nil, err
	}
	reqURL = s.clearURL
	if id != "" {
		reqURL = appendMissingParams(reqURL, queryParam{"id", id})
	}
	return reqURL, sealed.Values(), nil
}

// deleteURL is the URL of a delete push to an encrypted target: the clear
// URL with the push's id and delete=1, and nothing of the template's
// parameters.
func (s encryptedShape) deleteURL(p Push) string {
	return appendMissingParams(s.clearURL, params(p)...)
}
