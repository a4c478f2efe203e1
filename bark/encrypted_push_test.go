package bark

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/barktest"
)

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
	srv := barktest.New(t, "DEVKEY123456")
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
			map[string]string{"device_key": "DEVKEY123456", "body": "encrypted", "id": "mine"},
			map[string]string{"body": message, "level": "active", "isarchive": "0", "group": "lab", "url": "https://lavender.example/status", "id": "mine", "sound": "minuet"},
		},
		{
			"message in the query",
			"/DEVKEY123456?title=$0&icon=https%3A%2F%2Fi.example%2Fa.png",
			map[string]string{"device_key": "DEVKEY123456", "body": "encrypted", "id": "3f9a0c1d2e4b5a69"},
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
				before := srv.Count()
				shape, reason := shapeEncrypted(srv.URL + tc.tmpl)
				if reason != "" {
					t.Fatal(reason)
				}
				reqURL, form, err := e.encryptedRequest(shape, p)
				if err != nil {
					t.Fatal(err)
				}
				postEncrypted(t, reqURL, form)
				all := srv.Pushes()
				if len(all) != before+1 {
					t.Fatalf("server got %d requests", len(all)-before)
				}
				got := all[len(all)-1]
				if got.Status != 200 {
					t.Errorf("server answered %d %q", got.Status, got.Message)
				}
				if ct := got.Header.Get("Content-Type"); len(got.RawBody) > 0 && ct != "application/x-www-form-urlencoded" {
					t.Errorf("Content-Type %q", ct)
				}
				requestLine := got.Method + " " + got.RequestURI
				for _, leak := range []string{"swap", "54", "16.3", "gpu-7", "lavender.example", "passive"} {
					if strings.Contains(requestLine, leak) {
						t.Errorf("request line %q shows %q", requestLine, leak)
					}
				}
				for k, want := range tc.wantPath {
					if got.Params[k] != want {
						t.Errorf("server read %s=%q, want %q", k, got.Params[k], want)
					}
				}
				// Nothing else in clear: whatever the app reads is inside.
				for k := range got.Params {
					if _, ok := tc.wantPath[k]; !ok && k != "ciphertext" && k != "iv" {
						t.Errorf("server read %s=%q in clear", k, got.Params[k])
					}
				}
				if got.Params["ciphertext"] == "" || got.Params["iv"] == "" {
					t.Fatalf("no ciphertext/iv: %v", got.Params)
				}
				plain := barktest.AppDecrypt(t, alg.mode, alg.key, got.Params["iv"], got.Params["ciphertext"])
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

// TestEncryptionLeavesNothingTheAppReadsInClear: a template's own title and
// group go into the ciphertext and out of the URL; a delete carries only
// the key, the id and delete=1; a template that could only send its title
// in clear (a path segment) or sets ciphertext itself is refused, by
// file:line; a server under a URL prefix is reached through /push with the
// key in the query.
func TestEncryptionLeavesNothingTheAppReadsInClear(t *testing.T) {
	const key = "0123456789abcdef"
	srv := barktest.New(t, "KEY")
	const message = "[lavender-2] swap 54% full (16.3/32.0 GB) — consider intervening"
	enc := EncryptionKey + "=aes-128-cbc:" + key + "\n"
	ts := load(t, map[string]string{"phone.bark.env": enc +
		srv.URL + "/KEY/$0?title=Secret%20Title&group=g1\n" +
		srv.URL + "/push?device_key=KEY&title=Secret%20Title&body=$0\n"})
	if len(ts) != 2 {
		t.Fatalf("targets %v", ts)
	}
	for i, want := range []string{"POST /KEY/encrypted", "POST /push?device_key=KEY"} {
		before := srv.Count()
		if _, err := New(ts[i], nil, "").Notify(t.Context(), Push{Text: message}); err != nil {
			t.Fatalf("%s: %v", ts[i], err)
		}
		got := srv.Pushes()[before]
		if line := got.Method + " " + got.RequestURI; line != want {
			t.Errorf("%s: request %q, want %q", ts[i], line, want)
		}
		if got.DeviceKey != "KEY" || got.Status != 200 {
			t.Errorf("%s: server read key %q, answered %d", ts[i], got.DeviceKey, got.Status)
		}
		if strings.Contains(string(got.RawBody)+got.RequestURI, "Secret") || got.Params["title"] != "" || got.Params["group"] != "" {
			t.Errorf("%s: the title or group went in clear: %q %q", ts[i], got.RequestURI, got.RawBody)
		}
		plain := barktest.AppDecrypt(t, "cbc", key, got.Params["iv"], got.Params["ciphertext"])
		if plain["title"] != "Secret Title" || plain["body"] != message || plain["level"] != "passive" || plain["isarchive"] != "0" {
			t.Errorf("%s: app decrypted %v", ts[i], plain)
		}
		if i == 0 && plain["group"] != "g1" {
			t.Errorf("app decrypted group %q", plain["group"])
		}
	}

	before := srv.Count()
	if _, err := New(ts[0], nil, "").Notify(t.Context(), Push{ID: "3f9a0c1d2e4b5a69", Delete: true}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Pushes()[before]; got.Method+" "+got.RequestURI != "GET /KEY/encrypted?id=3f9a0c1d2e4b5a69&delete=1" {
		t.Errorf("delete request %s %s", got.Method, got.RequestURI)
	}

	_, err := LoadTargets(barktest.ConfigDir(t, map[string]string{"phone.bark.env": enc +
		srv.URL + "/KEY/Secret%20Title/$0\n" + srv.URL + "/KEY/$0?ciphertext=abc&iv=0123456789abcdef\n"}))
	want := "phone.bark.env:2: " + reasonEncryptedPath + "\nphone.bark.env:3: " + reasonEncryptedCipher
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if err != nil && strings.Contains(err.Error(), "Secret") {
		t.Errorf("the error quotes the line: %v", err)
	}
}
