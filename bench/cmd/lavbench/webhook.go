package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// webhookBody is testdata/firing_swap_54.json with a fingerprint and
// startsAt of its own per request, so the bridge's dedup lets every one
// through to Bark.
func webhookBody(n uint64) []byte {
	starts := time.Date(2026, 4, 24, 0, 45, 0, 0, time.UTC).Add(time.Duration(n) * time.Millisecond)
	return fmt.Appendf(nil, `{"receiver":"bark","status":"firing","alerts":[{"status":"firing",`+
		`"labels":{"alertname":"SwapUsageHigh","instance":"gpu-box:9877","job":"lavender"},`+
		`"annotations":{"summary":"Swap is 54%% full on gpu-box","swap_used_ratio":"0.54",`+
		`"swap_used_bytes":"17501991731","swap_total_bytes":"3.4359738368e+10"},`+
		`"startsAt":%q,"endsAt":"0001-01-01T00:00:00Z",`+
		`"generatorURL":"http://prometheus:9090/graph","fingerprint":"%016x"}],`+
		`"groupLabels":{"alertname":"SwapUsageHigh"},"commonLabels":{"job":"lavender"},`+
		`"commonAnnotations":{},"externalURL":"http://alertmanager:9093","version":"4",`+
		`"groupKey":"{}:{alertname=\"SwapUsageHigh\"}","truncatedAlerts":0}`, starts.Format(time.RFC3339Nano), n)
}

type loadResult struct {
	n       int
	elapsed time.Duration
	lat     durations
	codes   map[int]int
}

// postWebhooks posts unique webhook bodies from conns workers until dur has
// passed or maxN requests were sent, whichever comes first.
func postWebhooks(ctx context.Context, url string, conns int, dur time.Duration, maxN int, seq *atomic.Uint64) (loadResult, error) {
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	defer client.CloseIdleConnections()
	var (
		mu    sync.Mutex
		res   = loadResult{codes: map[int]int{}}
		sent  atomic.Int64
		first error
		wg    sync.WaitGroup
	)
	deadline := time.Now().Add(dur)
	t0 := time.Now()
	for range conns {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil && sent.Add(1) <= int64(maxN) {
				body := webhookBody(seq.Add(1))
				s := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := time.Since(s)
				mu.Lock()
				res.lat = append(res.lat, d)
				res.codes[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(t0)
	res.n = len(res.lat)
	res.lat = res.lat.sorted()
	return res, first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (r loadResult) codesString() string {
	var ks []int
	for k := range r.codes {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	var s []string
	for _, k := range ks {
		s = append(s, fmt.Sprintf("%d×%d", k, r.codes[k]))
	}
	return strings.Join(s, " ")
}

func runWebhook(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	lavender := fs.String("lavender", "lavender", "lavender binary")
	targets := fs.Int("targets", 1, "answering Bark targets")
	hang := fs.Bool("hang", false, "add one Bark target that never answers")
	connsFlag := fs.String("conns", "1,8", "concurrent clients, comma-separated")
	seconds := fs.Int("seconds", 8, "duration of each load run")
	maxN := fs.Int("max-requests", 100000, "bound on requests per load run")
	timeout := fs.Duration("bark-timeout", 5*time.Second, "--bark.timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *targets < 0 || *targets > 10 || *seconds < 1 || *seconds > 120 {
		return fmt.Errorf("targets 0-10, seconds 1-120")
	}
	dir, bark, cleanup, err := newRig()
	if err != nil {
		return err
	}
	defer cleanup()
	var keys []string
	for i := range *targets {
		keys = append(keys, "KEY"+strconv.Itoa(i))
	}
	if *hang {
		keys = append(keys, "hangKEY")
	}
	barkDir, err := writeTargets(dir, bark, keys...)
	if err != nil {
		return err
	}
	p, base, err := startBridge(ctx, *lavender, dir, barkDir, *timeout)
	if err != nil {
		return err
	}
	desc := fmt.Sprintf("%d answering target(s)", *targets)
	if *hang {
		desc += fmt.Sprintf(" + 1 hanging, --bark.timeout=%s", *timeout)
	}
	fmt.Printf("## Webhook: lavender bridge, %s\n\n", desc)
	fmt.Println("| clients | requests | req/s | p50 | p99 | max | answers | Bark pushes received |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	var seq atomic.Uint64
	for _, c := range strings.Split(*connsFlag, ",") {
		conns, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || conns < 1 || conns > 64 {
			return fmt.Errorf("bad -conns %q", *connsFlag)
		}
		before := bark.pushes()
		r, err := postWebhooks(ctx, base+"/webhook", conns, time.Duration(*seconds)*time.Second, *maxN, &seq)
		if err != nil {
			return err
		}
		fmt.Printf("| %d | %d | %.0f | %s | %s | %s | %s | %d |\n", conns, r.n, float64(r.n)/r.elapsed.Seconds(),
			ms(r.lat.pct(50)), ms(r.lat.pct(99)), ms(r.lat.pct(100)), r.codesString(), bark.pushes()-before)
		if *hang && r.lat.pct(100) > *timeout+2*time.Second {
			fmt.Printf("\nMISSED: an answer took %s, over --bark.timeout %s + 2 s margin\n", r.lat.pct(100), *timeout)
		}
	}
	k, _ := rssKiB(p.pid())
	fmt.Printf("\nbridge RSS after the runs: %s\n\n", mib(k))
	p.stop()
	return nil
}
