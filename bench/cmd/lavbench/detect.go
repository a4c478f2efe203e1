package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// predecessorPoll is the Python predecessor's watchdog period.
const predecessorPoll = 600 * time.Second

func runDetect(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("detect", flag.ContinueOnError)
	lavender := fs.String("lavender", "lavender", "lavender binary")
	interval := fs.Duration("interval", 5*time.Second, "--watchdog.interval; 0 for lavender's default (flag not passed)")
	trials := fs.Int("trials", 5, "crossings to time")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *trials < 1 || *trials > 100 {
		return fmt.Errorf("trials 1-100")
	}
	dir, bark, cleanup, err := newRig()
	if err != nil {
		return err
	}
	defer cleanup()
	procfs, err := newFakeProcfs(dir, 0.30)
	if err != nil {
		return err
	}
	barkDir, err := writeTargets(dir, bark, "KEY")
	if err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	// Storm control off: the trials push a crossing and its recovery every
	// few seconds, more than the 10 a minute a phone gets by default, and
	// a held push would be timed as a missed one.
	args = []string{"serve", "--web.listen-address=" + addr, "--path.procfs=" + procfs,
		"--runlog.dir=" + filepath.Join(dir, "logs"), "--bark.config-dir=" + barkDir, "--bark.max-per-minute=0"}
	effective := 5 * time.Second // lavender's default
	if *interval > 0 {
		args = append(args, "--watchdog.interval="+interval.String())
		effective = *interval
	}
	p, err := start(dir, "serve", nil, *lavender, args...)
	if err != nil {
		return err
	}
	base := "http://" + addr
	if err := waitHTTP(ctx, p, base+"/-/ready", 20*time.Second); err != nil {
		return err
	}
	var lat []float64
	for i := range *trials {
		if err := waitArmed(ctx, base, 3*effective+10*time.Second); err != nil {
			return fmt.Errorf("trial %d: %w", i+1, err)
		}
		// A random phase against the watchdog's ticker, so the trials sample
		// the whole interval rather than one point of it.
		if err := sleepCtx(ctx, time.Duration(rand.Int64N(int64(effective)))); err != nil {
			return err
		}
		for len(bark.arrivals) > 0 {
			<-bark.arrivals
		}
		t0 := time.Now()
		if err := writeMeminfo(procfs, 0.54); err != nil {
			return err
		}
		select {
		case t1 := <-bark.arrivals:
			lat = append(lat, t1.Sub(t0).Seconds())
		case <-time.After(effective + 10*time.Second):
			return fmt.Errorf("trial %d: no push within %s\n%s", i+1, effective+10*time.Second, p.tail())
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := writeMeminfo(procfs, 0.30); err != nil {
			return err
		}
	}
	p.stop()
	reportDetection(fmt.Sprintf("watchdog, --watchdog.interval=%s", effective), effective+time.Second, lat)
	return nil
}

// waitArmed waits until lavender_watchdog_armed is 1.
func waitArmed(ctx context.Context, base string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), "\nlavender_watchdog_armed 1\n") {
				return nil
			}
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("watchdog not re-armed within %s", timeout)
}

func reportDetection(what string, target time.Duration, lat []float64) {
	lo, hi := minMax(lat)
	med := median(lat)
	fmt.Printf("## Detection latency: %s\n\n", what)
	fmt.Printf("trials: %d; each: %s\n\n", len(lat), fmtList(lat))
	fmt.Println("| min | median | max | target | worst case vs 600 s poll | median vs 600 s poll |")
	fmt.Println("|---|---|---|---|---|---|")
	tgt := "-"
	if target > 0 {
		verdict := "met"
		if hi > target.Seconds() {
			verdict = "MISSED"
		}
		tgt = fmt.Sprintf("<= %s (%s)", target, verdict)
	}
	fmt.Printf("| %.2f s | %.2f s | %.2f s | %s | %.0f× faster | %.0f× faster |\n\n",
		lo, med, hi, tgt, predecessorPoll.Seconds()/hi, (predecessorPoll.Seconds()/2)/med)
	fmt.Println("(The predecessor's worst case is 600 s, its mean 300 s for a random crossing; the median column compares against 300 s.)")
	fmt.Println()
}

func fmtList(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, ", ") + " s"
}

// runDetectProm times the Prometheus path: lavender serve (watchdog off, as
// deploy/docker-compose.yml runs it) scraped by Prometheus with the shipped
// intervals and alerts.yml, Alertmanager with the shipped route timings, and
// the push from lavender's /webhook to the Bark stand-in. Each trial starts
// a fresh stack, so every crossing opens a new alert group (group_wait).
func runDetectProm(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("detect-prom", flag.ContinueOnError)
	lavender := fs.String("lavender", "lavender", "lavender binary")
	prometheus := fs.String("prometheus", "prometheus", "Prometheus binary")
	alertmanager := fs.String("alertmanager", "prometheus-alertmanager", "Alertmanager binary")
	repo := fs.String("repo", ".", "lavender checkout (for alerts.yml)")
	trials := fs.Int("trials", 3, "crossings to time")
	scrape := fs.Duration("scrape-interval", 15*time.Second, "Prometheus scrape and evaluation interval (shipped: 15s)")
	groupWait := fs.Duration("group-wait", 30*time.Second, "Alertmanager group_wait (shipped: 30s)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *trials < 1 || *trials > 20 {
		return fmt.Errorf("trials 1-20")
	}
	alerts, err := filepath.Abs(filepath.Join(*repo, "alerts.yml"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(alerts); err != nil {
		return err
	}
	var lat []float64
	for i := range *trials {
		l, err := promTrial(ctx, *lavender, *prometheus, *alertmanager, alerts, *scrape, *groupWait)
		if err != nil {
			return fmt.Errorf("trial %d: %w", i+1, err)
		}
		fmt.Printf("trial %d: %.2f s\n", i+1, l.Seconds())
		lat = append(lat, l.Seconds())
	}
	reportDetection(fmt.Sprintf("Prometheus path (scrape/eval %s, for: 30s, group_wait %s)", *scrape, *groupWait), 0, lat)
	return nil
}

func promTrial(ctx context.Context, lavender, prometheus, alertmanager, alerts string, scrape, groupWait time.Duration) (time.Duration, error) {
	defer killAll()
	dir, cleanup, err := tempDir()
	if err != nil {
		return 0, err
	}
	defer cleanup()
	bark, err := newBarkServer()
	if err != nil {
		return 0, err
	}
	defer bark.close()
	procfs, err := newFakeProcfs(dir, 0.30)
	if err != nil {
		return 0, err
	}
	barkDir, err := writeTargets(dir, bark, "KEY")
	if err != nil {
		return 0, err
	}
	lavAddr, _ := freeAddr()
	amAddr, _ := freeAddr()
	promAddr, _ := freeAddr()

	lav, err := start(dir, "serve", nil, lavender, "serve", "--web.listen-address="+lavAddr, "--path.procfs="+procfs,
		"--runlog.dir="+filepath.Join(dir, "logs"), "--bark.config-dir="+barkDir,
		"--watchdog.interval=0", "--bark.dedup-window=9m")
	if err != nil {
		return 0, err
	}
	amCfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(amCfg, []byte(fmt.Sprintf(`route:
  receiver: default
  group_by: [alertname, instance]
  group_wait: %s
  group_interval: 5m
  repeat_interval: 10m
  routes:
    - receiver: bark
      matchers:
        - alertname=~"SwapUsageHigh|PhaseStalled"
receivers:
  - name: default
  - name: bark
    webhook_configs:
      - url: http://%s/webhook
        send_resolved: true
`, groupWait, lavAddr)), 0o644); err != nil {
		return 0, err
	}
	am, err := start(dir, "alertmanager", nil, alertmanager, "--config.file="+amCfg,
		"--storage.path="+filepath.Join(dir, "am"), "--web.listen-address="+amAddr, "--cluster.listen-address=")
	if err != nil {
		return 0, err
	}
	promCfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
rule_files:
  - %s
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['%s']
scrape_configs:
  - job_name: lavender
    static_configs:
      - targets: ['%s']
`, scrape, scrape, alerts, amAddr, lavAddr)), 0o644); err != nil {
		return 0, err
	}
	prom, err := start(dir, "prometheus", nil, prometheus, "--config.file="+promCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+promAddr)
	if err != nil {
		return 0, err
	}
	if err := waitHTTP(ctx, lav, "http://"+lavAddr+"/-/ready", 20*time.Second); err != nil {
		return 0, err
	}
	if err := waitHTTP(ctx, am, "http://"+amAddr+"/-/ready", 30*time.Second); err != nil {
		return 0, err
	}
	if err := waitHTTP(ctx, prom, "http://"+promAddr+"/-/ready", 30*time.Second); err != nil {
		return 0, err
	}
	// Wait until Prometheus knows its Alertmanager and has scraped lavender
	// once, so the measurement starts from a steady deployment.
	deadline := time.Now().Add(scrape + 30*time.Second)
	for {
		am, up := promReady(promAddr)
		if am && up {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("prometheus: no alertmanager or lavender target not up\n%s", prom.tail())
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return 0, err
		}
	}
	if err := sleepCtx(ctx, time.Duration(rand.Int64N(int64(scrape)))); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := writeMeminfo(procfs, 0.54); err != nil {
		return 0, err
	}
	limit := 2*scrape + 30*time.Second + groupWait + 60*time.Second
	select {
	case t1 := <-bark.arrivals:
		return t1.Sub(t0), nil
	case <-time.After(limit):
		return 0, fmt.Errorf("no push within %s\nprometheus:\n%s\nalertmanager:\n%s\nlavender:\n%s", limit, prom.tail(), am.tail(), lav.tail())
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func promReady(promAddr string) (haveAM, targetUp bool) {
	fetch := func(path string) string {
		resp, err := http.Get("http://" + promAddr + path)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return string(b)
	}
	haveAM = strings.Contains(fetch("/api/v1/alertmanagers"), `"activeAlertmanagers":[{`)
	targetUp = strings.Contains(fetch("/api/v1/targets?state=active"), `"health":"up"`)
	return
}
