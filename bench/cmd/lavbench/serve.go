package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// startServe runs `lavender serve` on the real /proc with one Bark target
// and the default watchdog, and waits until it is ready.
func startServe(ctx context.Context, dir, name, lavender string, bark *barkServer, env []string, extra ...string) (*proc, string, error) {
	barkDir, err := writeTargets(filepath.Join(dir, name), bark, "KEY")
	if err != nil {
		return nil, "", err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	args := append([]string{"serve", "--web.listen-address=" + addr, "--path.procfs=/proc",
		"--runlog.dir=" + filepath.Join(dir, name, "logs"), "--bark.config-dir=" + barkDir}, extra...)
	p, err := start(dir, name, env, lavender, args...)
	if err != nil {
		return nil, "", err
	}
	base := "http://" + addr
	return p, base, waitHTTP(ctx, p, base+"/-/ready", 20*time.Second)
}

func runServeRSS(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve-rss", flag.ContinueOnError)
	lavender := fs.String("lavender", "lavender", "lavender binary")
	scrapes := fs.Int("scrapes", 10000, "scrapes (gzip, one connection, as Prometheus)")
	webhooks := fs.Int("webhooks", 1000, "webhooks, each a unique alert pushed to one Bark target")
	envs := fs.String("envs", "", "semicolon-separated variants of extra environment, each comma-separated KEY=VALUE; empty string is the default")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *scrapes < 0 || *scrapes > 1_000_000 || *webhooks < 0 || *webhooks > 100_000 {
		return fmt.Errorf("scrapes 0-1e6, webhooks 0-1e5")
	}
	dir, bark, cleanup, err := newRig()
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Printf("## serve RSS after %d scrapes + %d webhooks (real /proc, watchdog at its default 5s)\n\n", *scrapes, *webhooks)
	fmt.Println("| environment | RSS at ready | after scrapes | after webhooks | of it anonymous (RssAnon) | scrapes/s | webhooks/s |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for i, variant := range strings.Split(*envs, ";") {
		var env []string
		if v := strings.TrimSpace(variant); v != "" {
			env = strings.Split(v, ",")
		}
		p, base, err := startServe(ctx, dir, fmt.Sprintf("serve%d", i), *lavender, bark, env)
		if err != nil {
			return err
		}
		r0, _ := rssKiB(p.pid())
		client := &http.Client{Timeout: 30 * time.Second}
		hdr := map[string]string{"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip"}
		t0 := time.Now()
		for range *scrapes {
			if _, err := get(client, base+"/metrics", hdr); err != nil {
				return err
			}
		}
		scrapeRate := float64(*scrapes) / time.Since(t0).Seconds()
		client.CloseIdleConnections()
		r1, _ := rssKiB(p.pid())
		var seq atomic.Uint64
		res, err := postWebhooks(ctx, base+"/webhook", 1, 10*time.Minute, *webhooks, &seq)
		if err != nil {
			return err
		}
		if res.codes[200] != *webhooks {
			return fmt.Errorf("webhooks answered %s", res.codesString())
		}
		r2, _ := rssKiB(p.pid())
		a2, _ := anonKiB(p.pid())
		name := strings.Join(env, " ")
		if name == "" {
			name = "(default)"
		}
		fmt.Printf("| %s | %s | %s | **%s** | %s | %.0f | %.0f |\n", name, mib(r0), mib(r1), mib(r2), mib(a2), scrapeRate,
			float64(res.n)/res.elapsed.Seconds())
		p.stop()
	}
	fmt.Println("\ntarget: serve RSS <= 20 MiB after 10,000 scrapes + 1,000 webhooks")
	fmt.Println()
	return nil
}

func runFootprint(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("footprint", flag.ContinueOnError)
	lavender := fs.String("lavender", "lavender", "lavender binary")
	seconds := fs.Int("seconds", 600, "measurement window")
	scrapeEvery := fs.Duration("scrape-every", 15*time.Second, "scrape interval of the second, Prometheus-like instance; 0: run only the idle one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *seconds < 10 || *seconds > 7200 {
		return fmt.Errorf("seconds 10-7200")
	}
	dir, bark, cleanup, err := newRig()
	if err != nil {
		return err
	}
	defer cleanup()
	type inst struct {
		name       string
		p          *proc
		base       string
		ticks0     int64
		rss0, peak int
	}
	var insts []*inst
	p, base, err := startServe(ctx, dir, "idle", *lavender, bark, nil)
	if err != nil {
		return err
	}
	insts = append(insts, &inst{name: "serve, idle (no requests)", p: p, base: base})
	if *scrapeEvery > 0 {
		p, base, err := startServe(ctx, dir, "scraped", *lavender, bark, nil)
		if err != nil {
			return err
		}
		insts = append(insts, &inst{name: fmt.Sprintf("serve, scraped every %s (gzip)", *scrapeEvery), p: p, base: base})
	}
	// Let start-up (run-log creation, first poll, GC of start-up garbage) settle.
	if err := sleepCtx(ctx, 5*time.Second); err != nil {
		return err
	}
	for _, in := range insts {
		in.ticks0, _ = cpuTicks(in.p.pid())
		in.rss0, _ = rssKiB(in.p.pid())
		in.peak = in.rss0
	}
	t0 := time.Now()
	end := t0.Add(time.Duration(*seconds) * time.Second)
	client := &http.Client{Timeout: 10 * time.Second}
	hdr := map[string]string{"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip"}
	nextScrape := t0
	for time.Now().Before(end) {
		if *scrapeEvery > 0 && !time.Now().Before(nextScrape) {
			if _, err := get(client, insts[1].base+"/metrics", hdr); err != nil {
				return err
			}
			nextScrape = nextScrape.Add(*scrapeEvery)
		}
		for _, in := range insts {
			if k, err := rssKiB(in.p.pid()); err == nil {
				in.peak = max(in.peak, k)
			}
		}
		if err := sleepCtx(ctx, min(time.Second, time.Until(end))); err != nil {
			return err
		}
	}
	elapsed := time.Since(t0)
	fmt.Printf("## Footprint over %s (watchdog at its default 5s, real /proc, one Bark target)\n\n", elapsed.Round(time.Second))
	fmt.Println("| instance | CPU time | % of one core | RSS at start | RSS at end | peak RSS |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, in := range insts {
		ticks, err := cpuTicks(in.p.pid())
		if err != nil {
			return err
		}
		rss, _ := rssKiB(in.p.pid())
		cpu := float64(ticks-in.ticks0) / userHZ
		fmt.Printf("| %s | %.2f s | **%.3f %%** | %s | %s | %s |\n", in.name, cpu, 100*cpu/elapsed.Seconds(),
			mib(in.rss0), mib(rss), mib(in.peak))
		in.p.stop()
	}
	fmt.Println("\ntarget: idle serve <= 0.1 % of one core. CPU is utime+stime from /proc/PID/stat (10 ms ticks).")
	fmt.Println()
	return nil
}
