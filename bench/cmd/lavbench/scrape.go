package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// peer is one of the two programs compared in runScrape.
type peer struct {
	name string
	p    *proc
	url  string
}

func runScrape(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("scrape", flag.ContinueOnError)
	lavender := fs.String("lavender", "lavender", "lavender binary")
	nodeExporter := fs.String("node-exporter", "prometheus-node-exporter", "node_exporter binary")
	wrk := fs.String("wrk", "wrk", "wrk binary")
	rounds := fs.Int("rounds", 3, "alternating wrk rounds per setting")
	seconds := fs.Int("seconds", 8, "duration of each wrk run")
	connsFlag := fs.String("conns", "1,8", "concurrent clients, comma-separated")
	gzip := fs.Bool("gzip", true, "also measure with Accept-Encoding: gzip, as Prometheus scrapes")
	scrapes := fs.Int("scrapes", 10000, "scrapes before the RSS reading")
	lavEnv := fs.String("lavender-env", "", "extra environment for lavender, comma-separated KEY=VALUE")
	baseline := fs.String("baseline", "", "a second lavender binary (say, the previous commit's) measured in the same run, as lavender-baseline")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 1 || *rounds > 20 || *seconds < 1 || *seconds > 120 || *scrapes < 0 || *scrapes > 1_000_000 {
		return fmt.Errorf("rounds 1-20, seconds 1-120, scrapes 0-1e6")
	}
	var conns []int
	for _, c := range strings.Split(*connsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 || n > 256 {
			return fmt.Errorf("bad -conns %q", *connsFlag)
		}
		conns = append(conns, n)
	}
	dir, cleanup, err := tempDir()
	if err != nil {
		return err
	}
	defer cleanup()

	var env []string
	if *lavEnv != "" {
		env = strings.Split(*lavEnv, ",")
	}
	peers, err := startPeers(ctx, dir, *lavender, *baseline, *nodeExporter, env)
	if err != nil {
		return err
	}

	fmt.Println("## Scrape: lavender exporter vs node_exporter --collector.disable-defaults --collector.meminfo")
	if len(env) > 0 {
		fmt.Printf("lavender environment: %s\n", strings.Join(env, " "))
	}
	fmt.Println()
	fmt.Println("| program | RSS at start | bytes/scrape | bytes/scrape (gzip) | samples |")
	fmt.Println("|---|---|---|---|---|")
	startRSS := map[string]int{}
	for _, pr := range peers {
		plain, samples, err := scrapeSize(pr.url, false)
		if err != nil {
			return err
		}
		gz, _, err := scrapeSize(pr.url, true)
		if err != nil {
			return err
		}
		startRSS[pr.name], _ = rssKiB(pr.p.pid())
		fmt.Printf("| %s | %s | %d | %d | %d |\n", pr.name, mib(startRSS[pr.name]), plain, gz, samples)
	}

	// Scrapes as Prometheus makes them: one connection, gzip, text format,
	// alternating in blocks of 1000 so both see the same machine.
	client := &http.Client{Timeout: 30 * time.Second}
	hdr := map[string]string{"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip"}
	elapsed := map[string]time.Duration{}
	for done := 0; done < *scrapes; done += 1000 {
		n := min(1000, *scrapes-done)
		for _, pr := range peers {
			t0 := time.Now()
			for range n {
				if _, err := get(client, pr.url, hdr); err != nil {
					return err
				}
			}
			elapsed[pr.name] += time.Since(t0)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	client.CloseIdleConnections()
	rss, anon := map[string]int{}, map[string]int{}
	fmt.Printf("\nAfter %d sequential gzip scrapes each (Go client, alternating blocks of 1000):\n\n", *scrapes)
	fmt.Println("| program | RSS | RssAnon | scrapes/s (sequential, gzip, incl. client) |")
	fmt.Println("|---|---|---|---|")
	for _, pr := range peers {
		rss[pr.name], _ = rssKiB(pr.p.pid())
		anon[pr.name], _ = anonKiB(pr.p.pid())
		fmt.Printf("| %s | %s | %s | %.0f |\n", pr.name, mib(rss[pr.name]), mib(anon[pr.name]), float64(*scrapes)/elapsed[pr.name].Seconds())
	}
	for _, pr := range peers[:len(peers)-1] {
		fmt.Printf("\nRSS ratio %s/node_exporter after %d scrapes: %.2f (target <= 0.75); RssAnon ratio %.2f (target <= 0.8)\n",
			pr.name, *scrapes, float64(rss[pr.name])/float64(rss["node_exporter"]), float64(anon[pr.name])/float64(anon["node_exporter"]))
	}

	type key struct {
		conns int
		gzip  bool
		name  string
	}
	results := map[key][]wrkResult{}
	encodings := []bool{false}
	if *gzip {
		encodings = append(encodings, true)
	}
	fmt.Printf("\nwrk: %d rounds of %ds per program and setting, alternating which program goes first.\n", *rounds, *seconds)
	for r := range *rounds {
		for _, c := range conns {
			for _, gz := range encodings {
				// Each round starts with the next program.
				order := append(append([]peer{}, peers[r%len(peers):]...), peers[:r%len(peers)]...)
				for _, pr := range order {
					t0, err := cpuTicks(pr.p.pid())
					if err != nil {
						return err
					}
					res, err := runWrk(ctx, *wrk, pr.url, c, *seconds, gz)
					if err != nil {
						return err
					}
					t1, err := cpuTicks(pr.p.pid())
					if err != nil {
						return err
					}
					res.cpuPerReq = float64(t1-t0) / userHZ / float64(res.requests) * 1e6
					results[key{c, gz, pr.name}] = append(results[key{c, gz, pr.name}], res)
				}
			}
		}
	}
	fmt.Println()
	fmt.Println("| clients | encoding | program | req/s median (min-max) | p50 median | p99 median (min-max) | server CPU per request, median | ratio to node_exporter (medians) |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, c := range conns {
		for _, gz := range encodings {
			enc := "identity"
			if gz {
				enc = "gzip"
			}
			rpsOf := func(name string) []float64 {
				var rps []float64
				for _, x := range results[key{c, gz, name}] {
					rps = append(rps, x.rps)
				}
				return rps
			}
			node := median(rpsOf("node_exporter"))
			med := make([]float64, len(peers))
			for i, pr := range peers {
				rs := results[key{c, gz, pr.name}]
				var p50, p99, cpu []float64
				for _, x := range rs {
					p50 = append(p50, x.p50)
					p99 = append(p99, x.p99)
					cpu = append(cpu, x.cpuPerReq)
				}
				rps := rpsOf(pr.name)
				med[i] = median(rps)
				lo, hi := minMax(rps)
				lo99, hi99 := minMax(p99)
				ratio := ""
				if pr.name != "node_exporter" {
					ratio = fmt.Sprintf("**%.2f×**", med[i]/node)
				}
				fmt.Printf("| %d | %s | %s | %.0f (%.0f-%.0f) | %.3f ms | %.3f ms (%.3f-%.3f) | %.0f µs | %s |\n",
					c, enc, pr.name, med[i], lo, hi, median(p50), median(p99), lo99, hi99, median(cpu), ratio)
			}
		}
	}
	fmt.Println()
	fmt.Println("| program | RSS after all wrk runs | RssAnon |")
	fmt.Println("|---|---|---|")
	for _, pr := range peers {
		k, _ := rssKiB(pr.p.pid())
		a, _ := anonKiB(pr.p.pid())
		fmt.Printf("| %s | %s | %s |\n", pr.name, mib(k), mib(a))
	}
	for _, pr := range peers {
		pr.p.stop()
	}
	return nil
}

// startPeers starts lavender, the baseline lavender if there is one, and
// node_exporter, in that order, which the tables keep (node_exporter last).
func startPeers(ctx context.Context, dir, lavender, baseline, nodeExporter string, env []string) ([]peer, error) {
	var peers []peer
	for _, l := range []struct{ name, bin string }{{"lavender", lavender}, {"lavender-baseline", baseline}} {
		if l.bin == "" {
			continue
		}
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		p, err := start(dir, l.name, env, l.bin, "exporter",
			"--web.listen-address="+addr, "--runlog.dir="+filepath.Join(dir, l.name+"-logs"), "--path.procfs=/proc")
		if err != nil {
			return nil, err
		}
		peers = append(peers, peer{l.name, p, "http://" + addr + "/metrics"})
	}
	neAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	ne, err := start(dir, "node_exporter", nil, nodeExporter, "--web.listen-address="+neAddr,
		"--collector.disable-defaults", "--collector.meminfo")
	if err != nil {
		return nil, err
	}
	peers = append(peers, peer{"node_exporter", ne, "http://" + neAddr + "/metrics"})
	for _, pr := range peers {
		if err := waitHTTP(ctx, pr.p, pr.url, 20*time.Second); err != nil {
			return nil, err
		}
	}
	return peers, nil
}

func scrapeSize(url string, gz bool) (size, samples int, err error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := rawClient(1).Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			samples++
		}
	}
	return buf.Len(), samples, nil
}

type wrkResult struct {
	rps, p50, p99 float64 // p50/p99 in ms
	requests      int
	cpuPerReq     float64 // server CPU (user+system) per request, µs; set by the caller
}

var (
	wrkRPS  = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkReqs = regexp.MustCompile(`(\d+) requests in `)
	wrkPct  = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkBad  = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkErrs = regexp.MustCompile(`Socket errors: .*`)
)

func runWrk(ctx context.Context, wrk, url string, conns, seconds int, gz bool) (wrkResult, error) {
	threads := min(conns, 2)
	args := []string{"-t" + strconv.Itoa(threads), "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(seconds) + "s",
		"--timeout", "10s", "--latency", "-H", "Accept: text/plain;version=0.0.4"}
	if gz {
		args = append(args, "-H", "Accept-Encoding: gzip")
	}
	args = append(args, url)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+30)*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, wrk, args...).CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if m := wrkBad.FindSubmatch(out); m != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %s non-2xx answers\n%s", url, m[1], out)
	}
	if m := wrkErrs.Find(out); m != nil {
		fmt.Fprintf(os.Stderr, "wrk %s: %s\n", url, m)
	}
	var r wrkResult
	m := wrkRPS.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk output:\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := wrkReqs.FindSubmatch(out); m != nil {
		r.requests, _ = strconv.Atoi(string(m[1]))
	}
	if r.requests == 0 {
		return r, fmt.Errorf("no request count in wrk output:\n%s", out)
	}
	for _, pm := range wrkPct.FindAllSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(string(pm[2]), 64)
		switch string(pm[3]) {
		case "us":
			v /= 1000
		case "s":
			v *= 1000
		}
		if string(pm[1]) == "50" {
			r.p50 = v
		} else {
			r.p99 = v
		}
	}
	return r, nil
}
