package heartbeat

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestParseBaseURL: the Go CLI reads --url (LAVENDER_URL) as the Python
// client does, so one value set for a training job works for both.
func TestParseBaseURL(t *testing.T) {
	for _, tc := range []struct {
		raw, want, err string
	}{
		{raw: "127.0.0.1:9877", want: "http://127.0.0.1:9877"},
		{raw: "localhost:9877/", want: "http://localhost:9877"},
		{raw: " http://gpu-7:9877 ", want: "http://gpu-7:9877"},
		{raw: "HTTPS://gpu-7", want: "https://gpu-7"},
		{raw: "http://gpu-7:9877/lavender//", want: "http://gpu-7:9877/lavender"},
		{raw: "http://gpu-7:9877/api/v1/heartbeat", want: "http://gpu-7:9877"},
		{raw: "http://[::1]:9877", want: "http://[::1]:9877"},
		{raw: "", err: "empty"},
		{raw: "ftp://gpu-7:21", err: "scheme must be http or https"},
		{raw: "http://:9877", err: "no host"},
		{raw: "gpu-7:98x77", err: "gpu-7:98x77"},
		{raw: "gpu-7:70000", err: "bad port"},
		{raw: "http://alice:S3cret@gpu-7:9877", err: "carries credentials"},
		{raw: "alice:S3cret@gpu-7:9877", err: "carries credentials"},
		{raw: "http://gpu-7:9877/?token=S3cret", err: "no query or fragment"},
		{raw: "http://gpu-7:9877/#S3cret", err: "no query or fragment"},
		{raw: "http://alice:S3cret@gpu-7:bad/x?token=S3cret", err: "want http://host:port"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			u, err := ParseBaseURL(tc.raw)
			if tc.err != "" {
				if err == nil {
					t.Fatalf("got %s, want an error with %q", u, tc.err)
				}
				if !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %q does not say %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "S3cret") {
					t.Errorf("error %q quotes the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := u.String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestClientFormatsAsItsURL: a client holds the basic-auth password, so
// every fmt verb and slog print its base URL only.
func TestClientFormatsAsItsURL(t *testing.T) {
	c, err := NewClient("http://127.0.0.1:9877", WithBasicAuth("trainer", "S3CRETPW"))
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%s", "%d", "%x", "%q", "%#v"} {
		want := "http://127.0.0.1:9877"
		if verb == "%#v" {
			want = "heartbeat.Client(http://127.0.0.1:9877)"
		}
		if got := fmt.Sprintf(verb, c); got != want {
			t.Errorf("%s = %q, want %q", verb, got, want)
		}
	}
	var log strings.Builder
	slog.New(slog.NewTextHandler(&log, nil)).Info("ping", "client", c)
	if got := log.String(); strings.Contains(got, "S3CRETPW") || !strings.Contains(got, "client=http://127.0.0.1:9877") {
		t.Errorf("slog: %s", got)
	}
}
