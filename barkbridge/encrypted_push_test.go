package barkbridge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// barkV1Request is what a bark-server reads from a form or query push
// (route_push.go, routeDoPushV1): query keys lowercased, then POST form keys
// lowercased (later wins), then the path's title/body, unescaped.
type barkV1Request struct {
	requestLine string
	params      map[string]string
}

func parseBarkV1(t *testing.T, r *http.Request) barkV1Request {
	t.Helper()
	params := map[string]string{}
	for _, pair := range strings.Split(r.URL.RawQuery, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		uk, err1 := url.QueryUnescape(k)
		uv, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			t.Errorf("bad query escape in %q", pair)
		}
		params[strings.ToLower(uk)] = uv
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > 0 {
		if ct := r.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
			t.Errorf("Content-Type %q", ct)
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			t.Fatalf("form: %v", err)
		}
		for k, vs := range form {
			params[strings.ToLower(k)] = vs[len(vs)-1]
		}
	}
	segs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	params["device_key"] = segs[0]
	names := map[int][]string{2: {"body"}, 3: {"title", "body"}, 4: {"title", "subtitle", "body"}}[len(segs)]
	for i, name := range names {
		v, err := url.QueryUnescape(segs[i+1])
		if err != nil {
			t.Errorf("bad path escape %q", segs[i+1])
		}
		params[name] = v
	}
	return barkV1Request{requestLine: r.Method + " " + r.RequestURI, params: params}
}

// A Bark-compatible server on loopback that records what it parsed.
func newRecordingBark(t *testing.T) (*httptest.Server, func() []barkV1Request) {
	var (
		mu  sync.Mutex
		got []barkV1Request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := parseBarkV1(t, r)
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"code":200,"message":"success","timestamp":1}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []barkV1Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]barkV1Request(nil), got...)
	}
}

func postEncrypted(t *testing.T, reqURL string, form url.Values) {
	t.Helper()
	resp, err := http.PostForm(reqURL, form)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP %d", resp.StatusCode)
	}
}

func TestEncryptedRequestOverHTTP(t *testing.T) {
	srv, received := newRecordingBark(t)
	const message = "[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening"
	p := pushParams{
		Body: message, Level: "passive", IsArchive: "0", Group: "gpu-7:9100",
		URL: "https://lavender.example/status", ID: "3f9a0c1d2e4b5a69",
	}
	for _, tc := range []struct {
		name, tmpl string
		wantPath   map[string]string // parsed in clear by the server
		wantPlain  map[string]string // what the app decrypts
	}{
		{
			"path template",
			"/DEVKEY123456/$0",
			map[string]string{"device_key": "DEVKEY123456", "body": "encrypted", "id": "3f9a0c1d2e4b5a69"},
			map[string]string{"body": message, "level": "passive", "isarchive": "0", "group": "gpu-7:9100", "url": "https://lavender.example/status", "id": "3f9a0c1d2e4b5a69"},
		},
		{
			"template keeps its own values, whatever their case",
			"/DEVKEY123456/$0?Level=active&GROUP=lab&sound=minuet&Id=mine",
			map[string]string{"device_key": "DEVKEY123456", "body": "encrypted", "id": "mine", "level": "active", "group": "lab", "sound": "minuet"},
			map[string]string{"body": message, "level": "active", "isarchive": "0", "group": "lab", "url": "https://lavender.example/status", "id": "mine", "sound": "minuet"},
		},
		{
			"message in the query",
			"/DEVKEY123456?title=$0&icon=https%3A%2F%2Fi.example%2Fa.png",
			map[string]string{"device_key": "DEVKEY123456", "title": "encrypted", "id": "3f9a0c1d2e4b5a69", "icon": "https://i.example/a.png"},
			map[string]string{"title": message, "level": "passive", "isarchive": "0", "group": "gpu-7:9100", "url": "https://lavender.example/status", "id": "3f9a0c1d2e4b5a69", "icon": "https://i.example/a.png"},
		},
	} {
		for _, alg := range []struct{ name, key, mode string }{
			{"aes-256-gcm", encTestKeys[32], "gcm"},
			{"aes-128-cbc", encTestKeys[16], "cbc"},
		} {
			t.Run(tc.name+"/"+alg.name, func(t *testing.T) {
				e, err := parseEncryption(alg.name + ":" + alg.key)
				if err != nil {
					t.Fatal(err)
				}
				before := len(received())
				reqURL, form, err := e.encryptedRequest(srv.URL+tc.tmpl, p)
				if err != nil {
					t.Fatal(err)
				}
				postEncrypted(t, reqURL, form)
				all := received()
				if len(all) != before+1 {
					t.Fatalf("server got %d requests", len(all)-before)
				}
				got := all[len(all)-1]
				for _, leak := range []string{"swap", "54", "16.3", "gpu-7", "lavender.example", "passive"} {
					if strings.Contains(got.requestLine, leak) {
						t.Errorf("request line %q shows %q", got.requestLine, leak)
					}
				}
				for k, want := range tc.wantPath {
					if got.params[k] != want {
						t.Errorf("server read %s=%q, want %q", k, got.params[k], want)
					}
				}
				if got.params["ciphertext"] == "" || got.params["iv"] == "" {
					t.Fatalf("no ciphertext/iv: %v", got.params)
				}
				plain := appDecrypt(t, alg.mode, alg.key, got.params["iv"], got.params["ciphertext"])
				if len(plain) != len(tc.wantPlain) {
					t.Errorf("app decrypted %v\nwant %v", plain, tc.wantPlain)
				}
				for k, want := range tc.wantPlain {
					if plain[k] != want {
						t.Errorf("app decrypted %s=%q, want %q", k, plain[k], want)
					}
				}
			})
		}
	}
}
