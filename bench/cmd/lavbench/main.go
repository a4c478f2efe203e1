// Command lavbench drives lavender's benchmarks for bench/run.sh: it starts
// lavender, node_exporter, Prometheus and Alertmanager as child processes on
// free loopback ports, plays the Bark server itself, generates load, and
// prints one result table per measurement. Every child is killed when
// lavbench returns (and, through Pdeathsig, when lavbench dies).
//
// It only ever talks to 127.0.0.1, and every loop is bounded in count and
// time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

type command struct {
	name, help string
	run        func(ctx context.Context, args []string) error
}

var commands = []command{
	{"scrape", "lavender exporter vs node_exporter (meminfo only): wrk throughput and latency, bytes, RSS after N scrapes", runScrape},
	{"detect", "watchdog detection latency: fake procfs crosses 50 % -> Bark server receives the push", runDetect},
	{"detect-prom", "Prometheus path detection latency with the shipped deploy intervals", runDetectProm},
	{"webhook", "requests/s and latency through /webhook to 1 or 3 loopback Bark targets, optionally one hanging", runWebhook},
	{"bigwebhook", "answer time and RSS for the largest webhook body (12,000 alerts), once and 4 at once, every Bark target down", runBigWebhook},
	{"serve-rss", "RSS of lavender serve after N scrapes plus M webhooks", runServeRSS},
	{"footprint", "RSS and CPU of an idle lavender serve", runFootprint},
	{"runlog", "run-log appends per second with compaction, one or more writer processes", runRunlog},
	{"runlog-writer", "(internal) one run-log writer process", runRunlogWriter},
	{"pressure", "a real thrash (root): swap file, memory hog in a memory cgroup; pressure vs swap crossings and pushes, scrape p99 under thrash", runPressure},
	{"pressure-hog", "(internal) the memory hog of the pressure section", runPressureHog},
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, c := range commands {
		if c.name == os.Args[1] {
			err := c.run(ctx, os.Args[2:])
			killAll()
			if err != nil {
				if !errors.Is(err, flag.ErrHelp) {
					fmt.Fprintf(os.Stderr, "lavbench %s: %v\n", c.name, err)
				}
				os.Exit(1)
			}
			return
		}
	}
	usage()
	os.Exit(2)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: lavbench COMMAND [flags]")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-14s %s\n", c.name, c.help)
	}
}
