package bark

import (
	"net/url"
	"strings"
)

// queryParam is a Bark parameter lavender adds to a push unless the
// template sets it itself.
type queryParam struct {
	Key   string // as Bark documents it, e.g. "isArchive"
	Value string // unescaped
}

// templateParams returns the query parameters of a URL template the way
// bark-server (fasthttp's QueryArgs) reads them: keys lowercased, "+" and
// %XX decoded, a bad escape left as it is, a key without "=" set to "", and
// the last occurrence winning (?Level=x&level=y gives level=y).
func templateParams(tmpl string) map[string]string {
	params := make(map[string]string)
	_, query, ok := strings.Cut(tmpl, "?")
	if !ok {
		return params
	}
	query, _, _ = strings.Cut(query, "#")
	for _, pair := range strings.Split(query, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		params[strings.ToLower(lenientUnescape(k))] = lenientUnescape(v)
	}
	return params
}

// templateSets reports which parameters a template sets itself, by
// lowercased name: templateSets(t)["isarchive"].
func templateSets(tmpl string) map[string]bool {
	set := make(map[string]bool)
	for k := range templateParams(tmpl) {
		set[k] = true
	}
	return set
}

// lenientUnescape decodes like fasthttp: what does not decode stays as is.
func lenientUnescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// appendMissingParams appends each param whose key the template does not
// set (compared case-insensitively, as bark-server compares them), so a
// template's own group, level, url, … is kept: bark-server takes the last
// occurrence, so appending a key the template has would override it.
// Keys and values are escaped as the message is (escapeMessage): only
// RFC 3986's unreserved characters stay, so a space is %20 (not "+") and
// nothing can end the value early.
func appendMissingParams(tmpl string, params ...queryParam) string {
	set := templateSets(tmpl)
	var extra []string
	for _, p := range params {
		k := strings.ToLower(p.Key)
		if set[k] {
			continue
		}
		set[k] = true // a key given twice here is added once, the first value
		extra = append(extra, escapeMessage(p.Key)+"="+escapeMessage(p.Value))
	}
	if len(extra) == 0 {
		return tmpl
	}
	// Only the query decides the separator: an "&" in the path ("…/$0&")
	// separates nothing, and in "…/$0??" the query is "?", a key of its own.
	sep := "?"
	if _, query, ok := strings.Cut(tmpl, "?"); ok {
		sep = "&"
		if query == "" || strings.HasSuffix(query, "&") {
			sep = ""
		}
	}
	return tmpl + sep + strings.Join(extra, "&")
}
