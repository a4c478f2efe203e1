package barktest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// This file reads a push the way bark-server does (Finb/bark-server,
// route_push.go and apns/apns.go, read 2026-11). The order of the sources
// and who wins a clash are bark-server's:
//
//   - Content-Type application/json (the "V2" path): the JSON object first,
//     then the query string (keys lowercased), then the path segments.
//   - Anything else (the "V1" path): the query string (keys lowercased),
//     then an application/x-www-form-urlencoded body (keys lowercased), then
//     a multipart form's first values, then the path segments.
//
// Within one source, a later key wins over an earlier one that differs only
// in case (`?Level=x&level=y` gives level=y). Where bark-server's outcome
// depends on Go's map order (a JSON body with both "Title" and "title", or
// a multipart key in a case the query also has), the fake picks the later
// one, so the tests stay deterministic.

// route is what the URL path names.
type route struct {
	kind    routeKind
	segs    []string // compat push: the raw path segments, device key first
	message string   // routeNone: the 404 text, fiber's wording
}

type routeKind int

const (
	routeNone   routeKind = iota // no route: fiber's 404
	routePush                    // POST /push
	routeCompat                  // /:device_key[/:title[/:subtitle]]/:body
	routeHome                    // GET /: "ok"
	routePing                    // GET /ping: JSON "pong"
	routeHealth                  // GET /healthz: "ok"
)

// findRoute matches the raw path (fiber matches without unescaping, so
// %2F stays inside one segment), case-insensitively and with an optional
// trailing slash, as fiber does by default.
func findRoute(method, rawPath string) route {
	p := rawPath
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	switch {
	case p == "/" && method == http.MethodGet:
		return route{kind: routeHome}
	case strings.EqualFold(p, "/ping") && method == http.MethodGet:
		return route{kind: routePing}
	case strings.EqualFold(p, "/healthz") && method == http.MethodGet:
		return route{kind: routeHealth}
	case strings.EqualFold(p, "/push") && method == http.MethodPost:
		return route{kind: routePush}
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	ok := len(segs) >= 1 && len(segs) <= 4 && (method == http.MethodGet || method == http.MethodPost)
	for _, s := range segs {
		ok = ok && s != ""
	}
	if !ok {
		return route{kind: routeNone, message: "Cannot " + method + " " + rawPath}
	}
	return route{kind: routeCompat, segs: segs}
}

// params is bark-server's parameter map with its insertion order kept, so
// a clash resolves to the later key.
type params struct {
	order []string
	vals  map[string]string
}

func newParams() *params { return &params{vals: map[string]string{}} }

func (p *params) remove(key string) {
	delete(p.vals, key)
	p.order = slices.DeleteFunc(p.order, func(k string) bool { return k == key })
}

func (p *params) set(key, val string) {
	key = strings.ToLower(key)
	if _, ok := p.vals[key]; !ok {
		p.order = append(p.order, key)
	}
	p.vals[key] = val
}

// requestError is a push bark-server refuses before it reaches Apple.
type requestError struct {
	status  int
	message string
}

func (e *requestError) Error() string { return e.message }

// parsed is one request as bark-server reads it, before the device key is
// looked up. deviceKeys is set for a batch (JSON "device_keys").
type parsed struct {
	params     *params
	deviceKeys []string
}

// parseRequest reads every parameter of a push request. body is the whole
// request body, already read.
func parseRequest(r *http.Request, rt route, body []byte) (*parsed, error) {
	mediaType := strings.ToLower(r.Header.Get("Content-Type"))
	if mt, _, err := mime.ParseMediaType(mediaType); err == nil {
		mediaType = mt
	}
	_, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	out := &parsed{params: newParams()}
	isJSON := strings.HasPrefix(mediaType, "application/json")
	if isJSON {
		if err := readJSONParams(body, out.params); err != nil {
			return nil, &requestError{400, "request bind failed: " + err.Error()}
		}
		visitArgs(rawQuery, out.params.set)
	} else {
		visitArgs(rawQuery, out.params.set)
		switch mediaType {
		case "application/x-www-form-urlencoded":
			visitArgs(string(body), out.params.set)
		case "multipart/form-data":
			// A form that does not parse is ignored, as bark-server ignores
			// MultipartForm's error.
			r.Body = io.NopCloser(bytes.NewReader(body))
			if err := r.ParseMultipartForm(1 << 20); err == nil {
				for _, k := range slices.Sorted(maps.Keys(r.MultipartForm.Value)) {
					if v := r.MultipartForm.Value[k]; len(v) > 0 {
						out.params.set(k, v[0])
					}
				}
			}
		}
	}
	if err := setPathParams(rt, out.params); err != nil {
		return nil, &requestError{400, "url path parse failed: " + err.Error()}
	}
	// Only the JSON path knows batches; the query may name them too.
	if keys, ok := out.params.vals["device_keys"]; ok && isJSON {
		out.deviceKeys = strings.Split(keys, ",")
		out.params.remove("device_keys")
	}
	return out, nil
}

// setPathParams applies /:device_key/:title/:subtitle/:body, the highest
// priority. The key is taken raw; the others are query-unescaped ("+" is a
// space, a bad escape is an error).
func setPathParams(rt route, p *params) error {
	if rt.kind != routeCompat {
		return nil
	}
	segs := rt.segs
	p.set("device_key", segs[0])
	var names []string
	switch len(segs) {
	case 2:
		names = []string{"body"}
	case 3:
		names = []string{"title", "body"}
	case 4:
		names = []string{"title", "subtitle", "body"}
	}
	for i, name := range names {
		v, err := url.QueryUnescape(segs[i+1])
		if err != nil {
			return err
		}
		p.set(name, v)
	}
	return nil
}

// visitArgs walks a query string or form body the way fasthttp's Args do:
// pairs split on "&", "+" is a space, and a malformed %-escape is kept as
// it is rather than refused.
func visitArgs(s string, visit func(key, val string)) {
	for _, pair := range strings.Split(s, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		visit(lenientUnescape(k), lenientUnescape(v))
	}
}

func lenientUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

// readJSONParams reads a JSON object in document order. Strings are kept;
// numbers, booleans, null and arrays are formatted with %v as bark-server
// formats them into the APNs payload (1 → "1", null → "<nil>"); a nested
// object's members become parameters of their own. A "device_keys" array
// is kept joined with commas, as its string form would be.
func readJSONParams(body []byte, p *params) error {
	// fiber's body parser is json.Unmarshal into a map: its errors are
	// bark-server's. The second pass only learns the keys' order.
	var whole map[string]any
	if err := json.Unmarshal(body, &whole); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if key == "device_keys" {
			switch v := v.(type) {
			case string:
				p.set(key, v)
			case []any:
				keys := make([]string, len(v))
				for i, k := range v {
					keys[i] = fmt.Sprint(k)
				}
				p.set(key, strings.Join(keys, ","))
			default:
				return errors.New("invalid type for device_keys")
			}
			continue
		}
		if obj, ok := v.(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(obj)) {
				p.set(k, fmt.Sprintf("%v", obj[k]))
			}
			continue
		}
		if s, ok := v.(string); ok {
			p.set(key, s)
		} else {
			p.set(key, fmt.Sprintf("%v", v))
		}
	}
	return nil
}

// push builds the Push bark-server would hand to Apple from the merged
// parameters: its defaults (sound "1107", ".caf" appended, "Empty Message"
// for a push with no text) applied.
func (pr *parsed) push(deviceKey string) Push {
	p := Push{Params: map[string]string{}, Sound: "1107"}
	for _, k := range pr.params.order {
		p.Params[k] = pr.params.vals[k]
	}
	if deviceKey != "" {
		p.Params["device_key"] = deviceKey
	}
	v := p.Params
	p.DeviceKey, p.ID = v["device_key"], v["id"]
	p.Title, p.Subtitle, p.Body = v["title"], v["subtitle"], v["body"]
	if s, ok := v["sound"]; ok {
		p.Sound = s
		if !strings.HasSuffix(s, ".caf") {
			p.Sound = s + ".caf"
		}
	}
	p.Group, p.URL, p.Level, p.IsArchive = v["group"], v["url"], v["level"], v["isarchive"]
	p.Delete, p.Call = v["delete"], v["call"]
	p.Ciphertext, p.IV = v["ciphertext"], v["iv"]
	if p.Title == "" && p.Subtitle == "" && p.Body == "" {
		p.Body = "Empty Message"
	}
	return p
}
