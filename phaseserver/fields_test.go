package phaseserver

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lavender-ml/lavender/phaseapi"
)

// post sends body to the heartbeat API and returns the status and the
// answer's phase or error.
func post(t *testing.T, url, body string) (int, phaseapi.Phase, string) {
	t.Helper()
	code, _, data := request(t, http.MethodPost, url+phaseapi.HeartbeatPath, body)
	var p phaseapi.Phase
	var e phaseapi.ErrorResponse
	if code == http.StatusOK {
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatalf("%s: answer %s: %v", body, data, err)
		}
	} else if err := json.Unmarshal(data, &e); err != nil || e.Error == "" {
		t.Fatalf("%s: error answer %s is not {\"error\":…}", body, data)
	}
	return code, p, e.Error
}

// Every new field travels: the answer, GET /api/v1/phases and the saved
// table after a restart all carry what the heartbeats said.
func TestWorkFieldsAreKept(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	for _, body := range []string{
		`{"phase":"Finetune","event":"start","pid":4242,"boot_id":" 0b5c-boot \n","pid_ns":"pid:[4026531836]","dirs":["/data/run","/data/run/"]}`,
		`{"phase":"Finetune","event":"ping","step":10,"total":100,"loss":2.5,"save_bytes":1073741824}`,
		`{"phase":"Finetune","event":"ping","dirs":["/ckpt"],"eval_step":3,"eval_total":40,"save_bytes":2048}`,
		`{"phase":"Finetune","event":"ping","busy":"evaluating"}`,
		`{"phase":"Finetune","event":"ping","loss":"NaN","pid":999}`,
	} {
		if code, _, msg := post(t, srv.URL, body); code != http.StatusOK {
			t.Fatalf("%s: %d %s", body, code, msg)
		}
	}
	check := func(where string, p phaseapi.Phase) {
		t.Helper()
		if p.PID != 4242 || p.BootID != "0b5c-boot" || p.PIDNS != "pid:[4026531836]" {
			t.Errorf("%s: process %+v, want pid 4242 (a later ping's pid does not replace it), trimmed ids", where, p.Process)
		}
		if strings.Join(p.Dirs, ",") != "/data/run,/ckpt" {
			t.Errorf("%s: dirs %q, want cleaned, unrepeated, merged", where, p.Dirs)
		}
		if p.SaveBytes == nil || *p.SaveBytes != 2048 || len(p.Saves) != 2 || p.Saves[0].Bytes != 1<<30 {
			t.Errorf("%s: saves %v %+v, want the last (2048) and both", where, p.SaveBytes, p.Saves)
		}
		if p.Loss == nil || !math.IsNaN(float64(*p.Loss)) {
			t.Errorf("%s: loss %v, want NaN", where, p.Loss)
		}
		if p.EvalStep == nil || *p.EvalStep != 3 || p.EvalTotal != 40 || p.EvalProgressAt.IsZero() {
			t.Errorf("%s: eval %v/%d at %v", where, p.EvalStep, p.EvalTotal, p.EvalProgressAt)
		}
		if p.Busy != "evaluating" || p.BusyAt.IsZero() {
			t.Errorf("%s: busy %q at %v, want evaluating", where, p.Busy, p.BusyAt)
		}
	}
	code, _, data := request(t, http.MethodGet, srv.URL+phaseapi.PhasesPath, "")
	if code != http.StatusOK || !strings.Contains(string(data), `"loss":"NaN"`) {
		t.Fatalf("GET phases: %d %s, want the loss as \"NaN\"", code, data)
	}
	var resp phaseapi.PhasesResponse
	if err := json.Unmarshal(data, &resp); err != nil || len(resp.Phases) != 1 {
		t.Fatalf("GET phases: %s: %v", data, err)
	}
	check("GET /api/v1/phases", resp.Phases[0])
	if err := env.e.Close(); err != nil {
		t.Fatal(err)
	}
	env.restart()
	p, _ := env.phase("Finetune")
	check("after a restart", p)
}

// Each bad value of a new field is a 400 that names the field and changes
// nothing.
func TestWorkFieldsRefused(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	env.beat("Pretrain", phaseapi.EventStart, "")
	many := `"/a","/b","/c","/d","/e","/f","/g","/h","/i"`
	for _, tc := range []struct{ name, body, want string }{
		{"pid 0", `{"phase":"Pretrain","event":"start","pid":0}`, "pid must be 1"},
		{"negative pid", `{"phase":"Pretrain","event":"start","pid":-5}`, "pid must be 1"},
		{"pid past the limit", `{"phase":"Pretrain","event":"start","pid":99999999}`, "pid must be 1"},
		{"pid as text", `{"phase":"Pretrain","event":"start","pid":"4242"}`, `"pid" must be a number`},
		{"pid on end", `{"phase":"Pretrain","event":"end","pid":4242}`, "pid goes only with the start or ping event"},
		{"boot_id without pid", `{"phase":"Pretrain","event":"start","boot_id":"abc"}`, "boot_id goes only with pid"},
		{"pid_ns with a space", `{"phase":"Pretrain","event":"start","pid":1,"pid_ns":"pid: [1]"}`, "pid_ns must be"},
		{"relative dir", `{"phase":"Pretrain","event":"ping","dirs":["out"]}`, `"out" is not an absolute path`},
		{"empty dir", `{"phase":"Pretrain","event":"ping","dirs":[""]}`, "an empty path"},
		{"nine dirs", `{"phase":"Pretrain","event":"ping","dirs":[` + many + `]}`, "9 directories, more than 8"},
		{"dirs as a string", `{"phase":"Pretrain","event":"ping","dirs":"/a"}`, `"dirs" must be an array`},
		{"negative save", `{"phase":"Pretrain","event":"ping","save_bytes":-1}`, `"save_bytes" must be a whole number`},
		{"save on start", `{"phase":"Pretrain","event":"start","save_bytes":10}`, "save_bytes goes only with the ping event"},
		{"loss as other text", `{"phase":"Pretrain","event":"ping","loss":"nan"}`, `loss must be a number or one of "NaN"`},
		{"loss past float64", `{"phase":"Pretrain","event":"ping","loss":1e999}`, "loss must be a number within"},
		{"loss as an object", `{"phase":"Pretrain","event":"ping","loss":{}}`, "loss must be"},
		{"eval_total 0", `{"phase":"Pretrain","event":"ping","eval_step":0,"eval_total":0}`, "eval_total must be 1 or more"},
		{"eval_total alone", `{"phase":"Pretrain","event":"ping","eval_total":5}`, "eval_total goes only with eval_step"},
		{"eval past its total", `{"phase":"Pretrain","event":"ping","eval_step":6,"eval_total":5}`, "eval_step 6 is past the eval_total of 5"},
		{"eval on end", `{"phase":"Pretrain","event":"end","eval_step":1}`, "eval_step goes only with the ping event"},
		{"busy on end", `{"phase":"Pretrain","event":"end","busy":"saving"}`, "busy goes only with the ping event"},
		{"busy with a line break", `{"phase":"Pretrain","event":"ping","busy":"saving\n"}`, "busy must be 1 to 32 printable ASCII characters"},
		{"busy too long", `{"phase":"Pretrain","event":"ping","busy":"` + strings.Repeat("x", 33) + `"}`, "busy must be 1 to 32"},
		{"reason on ping", `{"phase":"Pretrain","event":"ping","reason":"x"}`, "reason goes only with the end event"},
		{"reason as a number", `{"phase":"Pretrain","event":"end","reason":7}`, `"reason" must be a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshotState(t, env)
			code, _, msg := post(t, srv.URL, tc.body)
			if code != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
				t.Errorf("%s: %d %q, want 400 saying %q", tc.body, code, msg, tc.want)
			}
			if after := snapshotState(t, env); after != before {
				t.Errorf("state changed:\n%s\nwant\n%s", after, before)
			}
		})
	}
	if got := testutil.ToFloat64(env.e.refusedTotal.WithLabelValues(refusedBadField)) + testutil.ToFloat64(env.e.refusedTotal.WithLabelValues(refusedMalformed)); got != 25 {
		t.Errorf("lavender_heartbeats_refused_total{reason=~\"bad_field|malformed\"} = %v, want 25", got)
	}
}

// A reason of any bytes never loses the end: invalid UTF-8, lone
// surrogates, control and format characters are replaced, a long reason is
// cut with "…" on a character boundary, and the run log's END line carries
// its head within 80 bytes.
func TestReasonOfAnyBytes(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	long := strings.Repeat("é", 300)
	for _, tc := range []struct{ name, reason, want string }{
		{"invalid UTF-8", "RuntimeError: bad \xff\xfe byte", "RuntimeError: bad \uFFFD\uFFFD byte"},
		{"lone surrogate", `OSError: \ud800 half`, "OSError: \uFFFD half"},
		{"reversed surrogates", `E: \udc00\ud800`, "E: \uFFFD\uFFFD"},
		{"controls and bidi", "  line one\nline\ttwo \u202e\u0007end  ", "line one line two \uFFFD\uFFFDend"},
		{"long", long, strings.Repeat("é", 199) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env.beat("Finetune", phaseapi.EventStart, "")
			body, _ := json.Marshal(map[string]string{"phase": "Finetune", "event": "end", "status": "failed"})
			raw := strings.TrimSuffix(string(body), "}") + `,"reason":"` + jsonEscapeRaw(tc.reason) + `"}`
			code, p, msg := post(t, srv.URL, raw)
			if code != http.StatusOK {
				t.Fatalf("%q: %d %s, want 200", raw, code, msg)
			}
			if p.Status != phaseapi.StatusFailed || p.Reason != tc.want {
				t.Errorf("reason %q, want %q", p.Reason, tc.want)
			}
		})
	}
	// Strictness stays for everything else: bad text in the phase name
	// beside a bad reason is still a 400.
	if code, _, _ := post(t, srv.URL, "{\"phase\":\"Fine\xfftune\",\"event\":\"end\",\"status\":\"failed\",\"reason\":\"x\xff\"}"); code != http.StatusBadRequest {
		t.Errorf("bad name with bad reason: %d, want 400", code)
	}
	if code, _, _ := post(t, srv.URL, "{\"phase\":\"Finetune\",\"event\":\"end\",\"reason\":\"a\xff\",\"reason\":\"b\"}"); code != http.StatusBadRequest {
		t.Errorf("two reasons: %d, want 400", code)
	}
	if code, _, _ := post(t, srv.URL, "{\"phase\":\"Finetune\",\"event\":\"end\",\"reason\":\"a\xff\"} {}"); code != http.StatusBadRequest {
		t.Errorf("trailing data after a bad reason: %d, want 400", code)
	}
}

// jsonEscapeRaw escapes quotes and line breaks for a JSON string but keeps
// invalid bytes and \u escapes as they are.
func jsonEscapeRaw(s string) string {
	return strings.NewReplacer(`"`, `\"`, "\n", `\n`, "\t", `\t`, "\a", `\u0007`).Replace(s)
}

func TestEndLineCarriesTheReason(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	for _, tc := range []struct{ name, reason, want string }{
		{"Finetune", "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", "END   Finetune 0s failed: RuntimeError"},
		{"Killed", "killed by SIGKILL", "END   Killed 0s failed: killed by SIGKILL"},
		{"Rank", "rank 1: torch.OutOfMemoryError: CUDA out of memory", "END   Rank 0s failed: rank 1: torch.OutOfMemoryError"},
		{"Long reason", strings.Repeat("word ", 30), "END   Long reason 0s failed: " + strings.Repeat("word ", 7) + "word…"},
		{strings.Repeat("n", 45), "RuntimeError: x", "END   " + strings.Repeat("n", 45) + " 0s failed"},
		{strings.Repeat("n", 40), "RuntimeError: x", "END   " + strings.Repeat("n", 40) + " 0s failed: RuntimeError"},
	} {
		env.beat(tc.name, phaseapi.EventStart, "")
		body, _ := json.Marshal(map[string]string{"phase": tc.name, "event": "end", "status": "failed", "reason": tc.reason})
		if code, _, msg := post(t, srv.URL, string(body)); code != http.StatusOK {
			t.Fatalf("%s: %d %s", body, code, msg)
		}
		entries := env.entries()
		last := entries[len(entries)-1]
		if last != tc.want {
			t.Errorf("END line %q, want %q", last, tc.want)
		}
		if len(last)+len("15:04:05 ") > 80 {
			t.Errorf("END line %q is %d bytes with its stamp, over 80", last, len(last)+9)
		}
	}
}

// Ends are events: the rules of which end counts, and that every one the
// watchdog must push is in Ends.
func TestEndRules(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	beat := func(body string, wantCode int) phaseapi.Phase {
		t.Helper()
		code, p, msg := post(t, srv.URL, body)
		if code != wantCode {
			t.Fatalf("%s: %d %s, want %d", body, code, msg, wantCode)
		}
		return p
	}
	// A failed end, then at once a start: both in the log, the end kept.
	beat(`{"phase":"R","event":"start"}`, 200)
	beat(`{"phase":"R","event":"end","status":"failed","reason":"RuntimeError: one"}`, 200)
	beat(`{"phase":"R","event":"start"}`, 200)
	// The same failure told twice (wrapper after the client inside it):
	// 200, one end, the first reason that says why kept, in the end too.
	beat(`{"phase":"W","event":"start"}`, 200)
	beat(`{"phase":"W","event":"end","status":"failed"}`, 200)
	p := beat(`{"phase":"W","event":"end","status":"failed","reason":"ValueError: inner"}`, 200)
	p = beat(`{"phase":"W","event":"end","status":"failed","reason":"exit code 1"}`, 200)
	if p.Reason != "ValueError: inner" {
		t.Errorf("W's reason %q, want the first one given", p.Reason)
	}
	// A failed end after an ok end fails the phase.
	beat(`{"phase":"OK","event":"start"}`, 200)
	beat(`{"phase":"OK","event":"end"}`, 200)
	if p = beat(`{"phase":"OK","event":"end","status":"failed","reason":"rank 1: OSError: [Errno 28] No space left on device"}`, 200); p.Status != phaseapi.StatusFailed {
		t.Errorf("OK after a late failed end: %s", p.Status)
	}
	// An ok end after a failed one never undoes it: 409, counted.
	beat(`{"phase":"OK","event":"end"}`, 409)
	// A failed end for a phase never started is recorded.
	beat(`{"phase":"Ghost","event":"end","status":"failed","reason":"killed by SIGKILL"}`, 200)
	// An ok end for one never started is still a 404.
	beat(`{"phase":"Nobody","event":"end"}`, 404)

	var got []string
	for _, end := range env.e.Ends() {
		got = append(got, end.Phase+" "+end.Status+" "+end.Reason)
	}
	want := []string{
		"R failed RuntimeError: one",
		"W failed ValueError: inner",
		"OK ok ",
		"OK failed rank 1: OSError: [Errno 28] No space left on device",
		"Ghost failed killed by SIGKILL",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ends:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantLog := []string{
		"START R", "END   R 0s failed: RuntimeError", "START R",
		"START W", "END   W 0s failed",
		"START OK", "END   OK 0s", "END   OK 0s failed: rank 1: OSError",
		"START Ghost", "END   Ghost 0s failed: killed by SIGKILL",
	}
	entries := env.entries()
	if got := entries[len(entries)-len(wantLog):]; strings.Join(got, "\n") != strings.Join(wantLog, "\n") {
		t.Errorf("run log ends with\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantLog, "\n"))
	}
	for reason, n := range map[string]float64{refusedOKAfterFail: 1, refusedUnknownPhase: 1, refusedEnded: 0} {
		if got := testutil.ToFloat64(env.e.refusedTotal.WithLabelValues(reason)); got != n {
			t.Errorf("refused{reason=%q} = %v, want %v", reason, got, n)
		}
	}
}

// TestEndKeepsTheLastLoss: an end carries the phase's last loss to the
// watchdog, so that a run that ends ok after its loss turned NaN is not
// pushed as a good one.
func TestEndKeepsTheLastLoss(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	for _, body := range []string{
		`{"phase":"Diverged","event":"start"}`,
		`{"phase":"Diverged","event":"ping","step":16,"total":16,"loss":"NaN"}`,
		`{"phase":"Diverged","event":"end"}`,
		`{"phase":"Fine","event":"start","loss":2.5}`,
		`{"phase":"Fine","event":"end","loss":0.75}`,
		`{"phase":"Quiet","event":"start"}`,
		`{"phase":"Quiet","event":"end"}`,
	} {
		if code, _, msg := post(t, srv.URL, body); code != 200 {
			t.Fatalf("%s: %d %s", body, code, msg)
		}
	}
	var got []string
	for _, end := range env.e.Ends() {
		loss := "none"
		if end.Loss != nil {
			loss = strconv.FormatFloat(float64(*end.Loss), 'g', -1, 64)
		}
		got = append(got, end.Phase+" "+loss)
	}
	if want := "Diverged NaN,Fine 0.75,Quiet none"; strings.Join(got, ",") != want {
		t.Errorf("ends %q, want %q", strings.Join(got, ","), want)
	}
}
