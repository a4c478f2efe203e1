package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lavender/barkbridge"
	"lavender/runlog"
)

// hamBark is a Bark stand-in whose device keys each fail a set number of
// first attempts with a 500 ("push failed"), then accept.
type hamBark struct {
	*httptest.Server
	mu       sync.Mutex
	failures map[string]int // key -> attempts still to fail
	attempts map[string]int
	accepted map[string]int
}

func hamNewBark(t *testing.T, failures map[string]int) *hamBark {
	b := &hamBark{failures: failures, attempts: map[string]int{}, accepted: map[string]int{}}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		b.mu.Lock()
		b.attempts[key]++
		code := 200
		if b.failures[key] > 0 {
			b.failures[key]--
			code = 500
		} else {
			b.accepted[key]++
		}
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]any{"code": code, "message": "m", "timestamp": 1})
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *hamBark) counts() (attempts, accepted map[string]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	attempts, accepted = map[string]int{}, map[string]int{}
	for k, v := range b.attempts {
		attempts[k] = v
	}
	for k, v := range b.accepted {
		accepted[k] = v
	}
	return attempts, accepted
}

func hamFreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestAlertmanagerRetriesUntilBarkRecovers puts Debian's Alertmanager, with
// the shipped config, in front of lavender's webhook, and a Bark that fails
// the first two attempts to one phone and the first to the other. Each 503
// makes Alertmanager retry the whole group; the bridge pushes again only to
// the phone that has not accepted yet. In the end each phone has exactly
// one push, and no more come over the following group intervals.
func TestAlertmanagerRetriesUntilBarkRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Alertmanager")
	}
	am := needTool(t, "prometheus-alertmanager", "prometheus-alertmanager")

	bark := hamNewBark(t, map[string]int{"PHONE": 2, "TABLET": 1})
	barkDir, logDir := t.TempDir(), t.TempDir()
	targets := fmt.Sprintf("%s/PHONE/$0\n%s/TABLET/$0\n", bark.URL, bark.URL)
	if err := os.WriteFile(filepath.Join(barkDir, "phones.bark.env"), []byte(targets), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	bridge, err := barkbridge.New(barkbridge.Config{
		ConfigDir: barkDir, Timeout: 5 * time.Second, Runlog: runlog.Options{Dir: logDir},
	}, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	bridge.Register(mux)
	var answers []int
	var answersMu sync.Mutex
	lavender := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		answersMu.Lock()
		answers = append(answers, rec.Code)
		answersMu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(lavender.Close)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, e2eAlertmanagerConfig(t, lavender.URL+"/webhook"), 0o644); err != nil {
		t.Fatal(err)
	}
	amAddr := hamFreeAddr(t)
	var amLog bytes.Buffer
	cmd := exec.Command(am, "--config.file="+cfg, "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+amAddr, "--cluster.listen-address=", "--log.level=debug")
	cmd.Stdout, cmd.Stderr = &amLog, &amLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("Alertmanager's log:\n%s", amLog.String())
		}
	})
	amURL := "http://" + amAddr
	hamWait(t, 30*time.Second, "Alertmanager ready", func() bool {
		resp, err := http.Get(amURL + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	alert := fmt.Sprintf(`[{"labels":{"alertname":"SwapUsageHigh","instance":"gpu-box:9877","job":"lavender","severity":"warning"},`+
		`"annotations":{"summary":"Swap is 54%% full","swap_used_ratio":"0.54","swap_used_bytes":"17501991731","swap_total_bytes":"34359738368"},`+
		`"startsAt":%q}]`, time.Now().UTC().Format(time.RFC3339))
	resp, err := http.Post(amURL+"/api/v2/alerts", "application/json", strings.NewReader(alert))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("posting the alert: %d %s", resp.StatusCode, body)
	}

	hamWait(t, 60*time.Second, "one accepted push per phone", func() bool {
		_, accepted := bark.counts()
		return accepted["PHONE"] >= 1 && accepted["TABLET"] >= 1
	})
	// Several group intervals (1s) more: nothing else may reach a phone.
	time.Sleep(5 * time.Second)
	attempts, accepted := bark.counts()
	answersMu.Lock()
	got := append([]int(nil), answers...)
	answersMu.Unlock()
	t.Logf("Bark attempts %v, accepted %v; webhook answers in order %v", attempts, accepted, got)
	if accepted["PHONE"] != 1 || accepted["TABLET"] != 1 {
		t.Errorf("accepted pushes %v, want exactly one per phone", accepted)
	}
	if attempts["PHONE"] != 3 || attempts["TABLET"] != 2 {
		t.Errorf("attempts %v, want PHONE 3 (two failures, then the push) and TABLET 2", attempts)
	}
	if strings.Join(strings.Fields(fmt.Sprint(got)), " ") != "[503 503 200]" {
		t.Errorf("webhook answers %v, want [503 503 200]: retry twice, then done", got)
	}
	for _, c := range []struct {
		target, result string
		want           float64
	}{
		{"phones.bark.env:1", "failed", 2}, {"phones.bark.env:1", "ok", 1},
		{"phones.bark.env:2", "failed", 1}, {"phones.bark.env:2", "ok", 1},
	} {
		if v := hamPushes(t, reg, c.target, c.result); v != c.want {
			t.Errorf("lavender_bark_pushes_total{target=%q,result=%q} = %v, want %v", c.target, c.result, v, c.want)
		}
	}
	data, err := os.ReadFile(hamRunLog(t, logDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{" BARK swap 54% sent ok=0 fail=2\n", " BARK swap 54% sent ok=1 fail=1\n", " BARK swap 54% sent ok=1 fail=0\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("run log lacks %q:\n%s", want, data)
		}
	}
}

// hamPushes is one sample of lavender_bark_pushes_total.
func hamPushes(t *testing.T, reg *prometheus.Registry, target, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "lavender_bark_pushes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["target"] == target && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no lavender_bark_pushes_total{target=%q,result=%q}", target, result)
	return 0
}

func hamRunLog(t *testing.T, dir string) string {
	t.Helper()
	path, err := runlog.CurrentPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func hamWait(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
