package bark

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"lavender/internal/barktest"
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
				before := srv.Count()
				reqURL, form, err := e.encryptedRequest(srv.URL+tc.tmpl, p)
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
