package deploy

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/runlogtest"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/runlog"
	"github.com/lavender-ml/lavender/webhook"
)

// TestAlertmanagerRetriesUntilBarkRecovers puts Debian's Alertmanager, with
// the shipped config, in front of lavender's webhook, and a Bark that fails
// the first four tries to one phone and the first two to the other. The
// bridge's retry stage tries each push twice here, so a webhook fails only
// when both tries did: each 503 makes Alertmanager retry the whole group,
// and the bridge pushes again only to the phone that has not accepted yet.
// In the end each phone has exactly one push, and no more come over the
// following group intervals.
func TestAlertmanagerRetriesUntilBarkRecovers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs Alertmanager")
	}
	am := testkit.NeedTool(t, "prometheus-alertmanager", "prometheus-alertmanager")

	bark := barktest.New(t, "PHONE", "TABLET")
	bark.SetKeyFault("PHONE", barktest.FailFirst(4, barktest.Status(500, "push failed")))
	bark.SetKeyFault("TABLET", barktest.FailFirst(2, barktest.Status(500, "push failed")))
	// counts are the pushes each phone got and accepted.
	counts := func() (attempts, accepted map[string]int) {
		attempts, accepted = map[string]int{}, map[string]int{}
		for _, p := range bark.Pushes() {
			attempts[p.DeviceKey]++
		}
		for _, p := range bark.Accepted() {
			accepted[p.DeviceKey]++
		}
		return attempts, accepted
	}
	barkDir := barktest.ConfigDir(t, map[string]string{"phones.bark.env": bark.Template("PHONE") + "\n" + bark.Template("TABLET") + "\n"})
	logDir := t.TempDir()
	reg := prometheus.NewRegistry()
	pipeline, err := delivery.New(delivery.Config{
		ConfigDir: barkDir, Timeout: 5 * time.Second, Runlog: runlog.Options{Dir: logDir},
		Retry: delivery.Retry{First: time.Millisecond, Max: time.Millisecond, Tries: 2},
	}, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer pipeline.Close()
	hook, err := webhook.New(webhook.Config{Timeout: 5 * time.Second}, pipeline, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	hook.Register(mux)
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
	amAddr := testkit.FreeAddrs(t, 1)[0]
	testkit.StartProgram(t, testkit.Options{}, am, "--config.file="+cfg, "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+amAddr, "--cluster.listen-address=", "--log.level=debug")
	amURL := "http://" + amAddr
	testkit.WaitReady(t, nil, amURL, "", "")

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

	testkit.WaitFor(t, 60*time.Second, func() bool {
		_, accepted := counts()
		return accepted["PHONE"] >= 1 && accepted["TABLET"] >= 1
	}, "one accepted push per phone")
	// Several group intervals (1s) more: nothing else may reach a phone.
	time.Sleep(5 * time.Second)
	attempts, accepted := counts()
	answersMu.Lock()
	got := append([]int(nil), answers...)
	answersMu.Unlock()
	t.Logf("Bark attempts %v, accepted %v; webhook answers in order %v", attempts, accepted, got)
	if accepted["PHONE"] != 1 || accepted["TABLET"] != 1 {
		t.Errorf("accepted pushes %v, want exactly one per phone", accepted)
	}
	if attempts["PHONE"] != 5 || attempts["TABLET"] != 3 {
		t.Errorf("attempts %v, want PHONE 5 (two webhooks of two failed tries, then the push) and TABLET 3", attempts)
	}
	if strings.Join(strings.Fields(fmt.Sprint(got)), " ") != "[503 503 200]" {
		t.Errorf("webhook answers %v, want [503 503 200]: retry twice, then done", got)
	}
	metrics, err := testkit.GatherMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target, result string
		want           float64
	}{
		{"phones.bark.env:1", "failed", 2}, {"phones.bark.env:1", "ok", 1},
		{"phones.bark.env:2", "failed", 1}, {"phones.bark.env:2", "ok", 1},
	} {
		if v := metrics.MustValue(t, "lavender_bark_pushes_total", testkit.Labels{"target": c.target, "result": c.result}); v != c.want {
			t.Errorf("lavender_bark_pushes_total{target=%q,result=%q} = %v, want %v", c.target, c.result, v, c.want)
		}
	}
	// One retry within each failed webhook.
	for target, want := range map[string]float64{"phones.bark.env:1": 2, "phones.bark.env:2": 1} {
		if v := metrics.MustValue(t, "lavender_bark_push_retries_total", testkit.Labels{"target": target}); v != want {
			t.Errorf("lavender_bark_push_retries_total{target=%q} = %v, want %v", target, v, want)
		}
	}
	log := runlogtest.Text(t, logDir)
	for _, want := range []string{" BARK swap 54% sent ok=0 fail=2\n", " BARK swap 54% sent ok=1 fail=1\n", " BARK swap 54% sent ok=1 fail=0\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("run log lacks %q:\n%s", want, log)
		}
	}
}
