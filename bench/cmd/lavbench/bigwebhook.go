package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// bigWebhookBody is one group of n alerts, each with its own fingerprint,
// so none is deduplicated away: with 12,000 alerts it is about 940 KB, under
// the default --webhook.max-bytes of 1 MiB.
func bigWebhookBody(n, round int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"version":"4","status":"firing","receiver":"bark","alerts":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"status":"firing","labels":{"alertname":"B"},"fingerprint":"%08x%08x"}`, round, i)
	}
	b.WriteString(`],"groupKey":"{}:{}"}`)
	return b.Bytes()
}

// runBigWebhook posts the largest webhook body the bridge accepts, once and
// then four at once, with every Bark target down, and reads the answer
// times and the bridge's RSS: the answer must come within --bark.timeout
// plus the 2 s margin, and RSS must come back down.
func runBigWebhook(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bigwebhook", flag.ContinueOnError)
	lavender := fs.String("lavender", "lavender", "lavender binary")
	targets := fs.Int("targets", 5, "Bark targets, all failing")
	mode := fs.String("bark", "down", "how every Bark target fails: down (connection refused), 500 (bark-server's answer when APNs refuses) or hang")
	alerts := fs.Int("alerts", 12000, "alerts in each body")
	parallel := fs.Int("parallel", 4, "bodies posted at once in the second run")
	timeout := fs.Duration("bark-timeout", 5*time.Second, "--bark.timeout")
	perMinute := fs.Int("max-per-minute", -1, "--bark.max-per-minute; -1 leaves lavender's default (storm control holds all but the first pushes)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var extra []string
	if *perMinute >= 0 {
		extra = append(extra, fmt.Sprintf("--bark.max-per-minute=%d", *perMinute))
	}
	if *targets < 1 || *targets > 10 || *alerts < 1 || *alerts > 20000 || *parallel < 1 || *parallel > 8 {
		return fmt.Errorf("targets 1-10, alerts 1-20000, parallel 1-8")
	}
	dir, cleanup, err := tempDir()
	if err != nil {
		return err
	}
	defer cleanup()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	down := l.Addr().String()
	switch *mode {
	case "down": // a port that nothing listens on
		l.Close()
	case "500", "hang":
		release := make(chan struct{})
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if *mode == "hang" {
				select {
				case <-r.Context().Done():
				case <-release:
				}
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			io.WriteString(w, `{"code":500,"message":"push failed: APNs refused","timestamp":1}`)
		})}
		go srv.Serve(l)
		defer func() {
			close(release)
			srv.Close()
		}()
	default:
		return fmt.Errorf("-bark must be down, 500 or hang")
	}
	var lines []string
	for i := range *targets {
		lines = append(lines, fmt.Sprintf("http://%s/KEY%d/$0", down, i))
	}
	barkDir := filepath.Join(dir, "bark")
	if err := os.Mkdir(barkDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(barkDir, "phone.bark.env"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	p, base, err := startBridge(ctx, *lavender, dir, barkDir, *timeout, extra...)
	if err != nil {
		return err
	}
	baseline, _ := rssKiB(p.pid())
	bound := *timeout + 2*time.Second
	fmt.Printf("## Large webhooks: %d alerts per body, %d Bark targets (-bark %s), --bark.timeout=%s (answer bound %s)\n\n",
		*alerts, *targets, *mode, *timeout, bound)
	fmt.Println("| bodies at once | body size | slowest answer | answers | RSS before | RSS peak | RSS 10 s after |")
	fmt.Println("|---|---|---|---|---|---|---|")
	client := &http.Client{Timeout: 60 * time.Second}
	for round, n := range []int{1, *parallel} {
		before, _ := rssKiB(p.pid())
		peak := before
		stop := make(chan struct{})
		var sampler sync.WaitGroup
		sampler.Go(func() {
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if k, err := rssKiB(p.pid()); err == nil && k > peak {
						peak = k
					}
				}
			}
		})
		var (
			mu      sync.Mutex
			slowest time.Duration
			codes   []string
			size    int
			first   error
			posts   sync.WaitGroup
		)
		for i := range n {
			body := bigWebhookBody(*alerts, round*10+i)
			size = len(body)
			posts.Go(func() {
				t0 := time.Now()
				resp, err := client.Post(base+"/webhook", "application/json", bytes.NewReader(body))
				d := time.Since(t0)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					first = cmpErr(first, err)
					return
				}
				head, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
				resp.Body.Close()
				first, _, _ := strings.Cut(string(head), "\n")
				codes = append(codes, strconv.Itoa(resp.StatusCode)+" "+first)
				slowest = max(slowest, d)
			})
		}
		posts.Wait()
		close(stop)
		sampler.Wait()
		if first != nil {
			return first
		}
		if err := sleepCtx(ctx, 10*time.Second); err != nil {
			return err
		}
		after, _ := rssKiB(p.pid())
		fmt.Printf("| %d | %d bytes | %s | %s | %s | %s | %s |\n", n, size, secs(slowest), strings.Join(dedupStrings(codes), "; "),
			mib(before), mib(peak), mib(after))
		if slowest > bound {
			fmt.Printf("\nMISSED: an answer took %s, over the bound of %s\n", secs(slowest), bound)
		}
	}
	end, _ := rssKiB(p.pid())
	fmt.Printf("\nbridge RSS at ready %s, at the end %s\n\n", mib(baseline), mib(end))
	p.stop()
	return nil
}

func dedupStrings(ss []string) []string {
	seen := map[string]int{}
	var order []string
	for _, s := range ss {
		if seen[s] == 0 {
			order = append(order, s)
		}
		seen[s]++
	}
	for i, s := range order {
		order[i] = fmt.Sprintf("%d× %s", seen[s], s)
	}
	return order
}
