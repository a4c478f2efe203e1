package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/runlog"
)

func parseCLI(t testing.TB, args ...string) *CLI {
	t.Helper()
	var cli CLI
	parser, err := kong.New(&cli, kong.Name("lavender"), kong.DefaultEnvars("LAVENDER"), flagDefaults(),
		kong.Exit(func(code int) { t.Fatalf("kong exit %d", code) }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &cli
}

func TestBridgeFlagErrors(t *testing.T) {
	dir := barktest.ConfigDir(t, nil)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--bark.timeout=0s"}, "--bark.timeout must be positive"},
		{[]string{"--bark.timeout=59s"}, "leaves no room"},
		{[]string{"--bark.threshold=1.5"}, "--bark.threshold must be in [0, 1]"},
		{[]string{"--webhook.max-bytes=0"}, "--webhook.max-bytes must be positive"},
		{[]string{"--bark.dedup-window=-1s"}, "--bark.dedup-window must not be negative, not -1s"},
		{[]string{"--bark.max-per-minute=1001"}, "--bark.max-per-minute must be in [0, 1000] (0 turns storm control off), not 1001"},
		{[]string{"--web.external-url=gpu-3:9110"}, `--web.external-url must be an absolute http(s) URL such as https://gpu-3.example:9110/, not "gpu-3:9110"`},
		{[]string{"--bark.config-dir", filepath.Join(dir, "missing")}, "--bark.config-dir: stat "},
	}
	for _, tt := range tests {
		cli := parseCLI(t, append([]string{"bridge", "--web.listen-address=127.0.0.1:0", "--bark.config-dir", dir}, tt.args...)...)
		err := cli.Bridge.serve(t.Context(), &Globals{Logger: slog.New(slog.DiscardHandler), Stdout: io.Discard, Stderr: io.Discard}, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.want)
		}
	}
}

func TestBarkFlagsConfig(t *testing.T) {
	cli := parseCLI(t, "bridge", "--bark.only-swap", "--bark.send-resolved", "--bark.dedup-window=10m",
		"--bark.swap-alertname=Swap", "--bark.threshold=0.7", "--webhook.max-bytes=2048")
	cfg, hook := cli.Bridge.deliveryConfig(runlog.Options{Dir: "x"}), cli.Bridge.webhookConfig()
	if !hook.OnlySwap || !hook.SendResolved || cfg.DedupWindow != 10*time.Minute || hook.SwapAlertname != "Swap" ||
		hook.Threshold != 0.7 || hook.MaxBodyBytes != 2048 || cfg.Timeout != 5*time.Second || hook.Timeout != 5*time.Second ||
		cfg.Prefix != "[lavender-2]" || hook.Prefix != "[lavender-2]" || cfg.ConfigDir == "" || cfg.Runlog.Dir != "x" {
		t.Errorf("delivery config = %+v, webhook config = %+v", cfg, hook)
	}
}
