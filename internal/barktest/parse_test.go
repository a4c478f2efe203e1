package barktest

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

// send makes one request and returns the status and body of the answer.
func send(t *testing.T, client *http.Client, method, url, contentType string, body []byte) (int, string) {
	t.Helper()
	// Opaque carries the path as written, even an escape Go would refuse.
	base, path, _ := strings.Cut(strings.TrimPrefix(url, "http://"), "/")
	req, err := http.NewRequest(method, "http://"+base+"/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = "/" + path
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// TestParsesAsBarkServer: each request is read as bark-server reads it
// (route_push.go): path segments, query, form, multipart and JSON, in its
// order of priority, keys case-folded with the later one winning.
func TestParsesAsBarkServer(t *testing.T) {
	s := New(t)
	multipartBody, multipartType := multipartForm(t, map[string]string{"Title": "from multipart", "group": "mp"})
	for _, tc := range []struct {
		name        string
		method      string
		target      string // path and query
		contentType string
		body        string
		status      int
		want        map[string]string // Push fields by name, or "param:x" for Params["x"]
	}{
		{name: "body only", method: "GET", target: "/KEY/hello", status: 200,
			want: map[string]string{"DeviceKey": "KEY", "Body": "hello", "Title": "", "Sound": "1107"}},
		{name: "title and body", method: "GET", target: "/KEY/t/b", status: 200,
			want: map[string]string{"Title": "t", "Body": "b"}},
		{name: "title subtitle body", method: "POST", target: "/KEY/t/s/b", status: 200,
			want: map[string]string{"Title": "t", "Subtitle": "s", "Body": "b"}},
		{name: "escaped slash stays in one segment", method: "GET", target: "/KEY/16.3%2F32.0%20GB", status: 200,
			want: map[string]string{"Title": "", "Body": "16.3/32.0 GB"}},
		{name: "raw slash splits title from body", method: "GET", target: "/KEY/swap%2054%25%20full%20(16.3/32.0%20GB)", status: 200,
			want: map[string]string{"Title": "swap 54% full (16.3", "Body": "32.0 GB)"}},
		{name: "plus is a space", method: "GET", target: "/KEY/a+b%2Bc", status: 200,
			want: map[string]string{"Body": "a b+c"}},
		{name: "bad escape in the query is kept", method: "GET", target: "/KEY/b?group=a%zz", status: 200,
			want: map[string]string{"Group": "a%zz"}},
		{name: "query keys fold case, last wins", method: "GET", target: "/KEY/b?Level=active&level=passive&ISARCHIVE=0&isArchive=1", status: 200,
			want: map[string]string{"Level": "passive", "IsArchive": "1", "param:isarchive": "1"}},
		{name: "last wins in any case", method: "GET", target: "/KEY/b?level=passive&LEVEL=critical", status: 200,
			want: map[string]string{"Level": "critical"}},
		{name: "every parameter lavender sends", method: "GET",
			target: "/KEY/b?id=inc-1&group=box&url=https%3A%2F%2Fl.example%2F&level=passive&isArchive=1&delete=1&call=1&sound=minuet&ciphertext=Q0lQ&iv=0123456789ab&volume=5",
			status: 200,
			want: map[string]string{"ID": "inc-1", "Group": "box", "URL": "https://l.example/", "Level": "passive", "IsArchive": "1",
				"Delete": "1", "Call": "1", "Sound": "minuet.caf", "Ciphertext": "Q0lQ", "IV": "0123456789ab", "param:volume": "5"}},
		{name: "sound keeps its .caf", method: "GET", target: "/KEY/b?sound=bell.caf", status: 200,
			want: map[string]string{"Sound": "bell.caf"}},
		{name: "path wins over query", method: "GET", target: "/KEY/fromPath?body=fromQuery&title=q", status: 200,
			want: map[string]string{"Body": "fromPath", "Title": "q"}},
		{name: "form wins over query, keys fold", method: "POST", target: "/KEY?title=q&group=q",
			contentType: "application/x-www-form-urlencoded", body: "Title=from+form&body=b", status: 200,
			want: map[string]string{"Title": "from form", "Body": "b", "Group": "q"}},
		{name: "multipart wins over query", method: "POST", target: "/KEY/b?title=q", contentType: multipartType, body: multipartBody, status: 200,
			want: map[string]string{"Title": "from multipart", "Group": "mp", "Body": "b"}},
		{name: "JSON to /push", method: "POST", target: "/push", contentType: "application/json; charset=utf-8",
			body: `{"device_key":"KEY","title":"t","Title":"T2","body":"b","isArchive":1,"delete":1,"badge":2,"group":"g"}`, status: 200,
			want: map[string]string{"DeviceKey": "KEY", "Title": "T2", "Body": "b", "IsArchive": "1", "Delete": "1", "param:badge": "2", "Group": "g"}},
		{name: "JSON: query wins over body", method: "POST", target: "/push?Title=q", contentType: "application/json",
			body: `{"device_key":"KEY","title":"t"}`, status: 200, want: map[string]string{"Title": "q"}},
		{name: "JSON: path wins over body", method: "POST", target: "/KEY/p", contentType: "application/json",
			body: `{"body":"j","id":"x"}`, status: 200, want: map[string]string{"Body": "p", "ID": "x"}},
		{name: "JSON: a nested object's members are parameters", method: "POST", target: "/push", contentType: "application/json",
			body: `{"device_key":"KEY","body":"b","ext":{"Group":"nested"}}`, status: 200, want: map[string]string{"Group": "nested"}},
		{name: "JSON: form parameters are not read", method: "POST", target: "/push", contentType: "application/json",
			body: `{"device_key":"KEY","body":"b"}`, status: 200, want: map[string]string{"Title": ""}},
		{name: "bad JSON", method: "POST", target: "/push", contentType: "application/json", body: `{"device_key":`, status: 400,
			want: map[string]string{"Message": "request bind failed: unexpected end of JSON input"}},
		{name: "no device key", method: "POST", target: "/push", contentType: "application/json", body: `{"body":"b"}`, status: 400,
			want: map[string]string{"Message": "device key is empty"}},
		{name: "unknown key is named", method: "GET", target: "/NOPE/b", status: 400,
			want: map[string]string{"DeviceKey": "NOPE", "Message": "failed to get device token: failed to get [NOPE] device token from database"}},
		{name: "encrypted push has no text", method: "GET", target: "/KEY?ciphertext=abc%2B%2F%3D&iv=0123456789abcdef", status: 200,
			want: map[string]string{"Body": "Empty Message", "param:body": "", "Ciphertext": "abc+/=", "IV": "0123456789abcdef"}},
		{name: "GET /push is a device key", method: "GET", target: "/push/b", status: 400,
			want: map[string]string{"DeviceKey": "push"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Count()
			code, answer := send(t, nil, tc.method, s.URL+tc.target, tc.contentType, []byte(tc.body))
			if code != tc.status {
				t.Errorf("HTTP %d %s, want %d", code, answer, tc.status)
			}
			var bark struct {
				Code      int    `json:"code"`
				Message   string `json:"message"`
				Timestamp int64  `json:"timestamp"`
			}
			if err := json.Unmarshal([]byte(answer), &bark); err != nil || bark.Code != tc.status || bark.Timestamp == 0 {
				t.Errorf("answer %q is not Bark's JSON with code %d (%v)", answer, tc.status, err)
			}
			pushes := s.Pushes()[before:]
			if len(pushes) != 1 {
				t.Fatalf("recorded %d pushes, want 1", len(pushes))
			}
			p := pushes[0]
			if p.Status != tc.status || p.Message != bark.Message {
				t.Errorf("recorded answer %d %q, sent %d %q", p.Status, p.Message, code, bark.Message)
			}
			if p.RequestURI != tc.target || p.Method != tc.method {
				t.Errorf("recorded %s %s, sent %s %s", p.Method, p.RequestURI, tc.method, tc.target)
			}
			for field, want := range tc.want {
				if got := field_(p, field); got != want {
					t.Errorf("%s = %q, want %q", field, got, want)
				}
			}
		})
	}
}

func field_(p Push, name string) string {
	if k, ok := strings.CutPrefix(name, "param:"); ok {
		return p.Params[k]
	}
	return map[string]string{
		"DeviceKey": p.DeviceKey, "ID": p.ID, "Title": p.Title, "Subtitle": p.Subtitle, "Body": p.Body,
		"Sound": p.Sound, "Group": p.Group, "URL": p.URL, "Level": p.Level, "IsArchive": p.IsArchive,
		"Delete": p.Delete, "Call": p.Call, "Ciphertext": p.Ciphertext, "IV": p.IV, "Message": p.Message,
	}[name]
}

func multipartForm(t *testing.T, fields map[string]string) (body, contentType string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for k, v := range fields {
		if err := w.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String(), w.FormDataContentType()
}

// TestRoutesOutsidePushes: what is not a push is answered as bark-server
// answers it and not recorded.
func TestRoutesOutsidePushes(t *testing.T) {
	s := New(t)
	for _, tc := range []struct {
		method, target string
		status         int
		body           string
	}{
		{"GET", "/", 200, "ok"},
		{"GET", "/healthz", 200, "ok"},
		{"GET", "/ping", 200, `"message":"pong"`},
		{"GET", "/KEY/a/b/c/d", 404, "Cannot GET /KEY/a/b/c/d"},
		{"GET", "/KEY//b", 404, "Cannot GET /KEY//b"},
		{"PUT", "/KEY/b", 404, "Cannot PUT /KEY/b"},
		// bark-server answers 400 in JSON ("url path parse failed"); Go's
		// server refuses the request line before any handler, with the
		// same status in plain text.
		{"GET", "/KEY/100%zz", 400, "Bad Request"},
	} {
		code, body := send(t, nil, tc.method, s.URL+tc.target, "", nil)
		if code != tc.status || !strings.Contains(body, tc.body) {
			t.Errorf("%s %s: %d %q, want %d with %q", tc.method, tc.target, code, body, tc.status, tc.body)
		}
	}
	if n := s.Count(); n != 0 {
		t.Errorf("recorded %d pushes, want none: %+v", n, s.Pushes())
	}
}

// TestBatchPush: a JSON push with device_keys is one push per key,
// answered 200 overall with each key's code in data.
func TestBatchPush(t *testing.T) {
	s := New(t, "PHONE", "TABLET")
	code, answer := send(t, nil, "POST", s.URL+"/push", "application/json",
		[]byte(`{"device_keys":["PHONE","NOPE","TABLET"],"body":"b","id":"i"}`))
	if code != 200 {
		t.Fatalf("HTTP %d %s", code, answer)
	}
	var bark struct {
		Data []struct {
			Code      int    `json:"code"`
			DeviceKey string `json:"device_key"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(answer), &bark); err != nil || len(bark.Data) != 3 || bark.Data[1].Code != 400 || bark.Data[2].Code != 200 {
		t.Errorf("answer %s (%v)", answer, err)
	}
	var got []string
	for _, p := range s.Pushes() {
		got = append(got, p.DeviceKey+"/"+p.Body+"/"+p.ID+"/"+http.StatusText(p.Status))
		if _, ok := p.Params["device_keys"]; ok {
			t.Errorf("device_keys left among the parameters: %v", p.Params)
		}
	}
	if want := "PHONE/b/i/OK NOPE/b/i/Bad Request TABLET/b/i/OK"; strings.Join(got, " ") != want {
		t.Errorf("pushes %q, want %q", strings.Join(got, " "), want)
	}
	if n := len(s.Accepted()); n != 2 {
		t.Errorf("Accepted() = %d, want 2", n)
	}
}
