package app

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/watchdog"
	"github.com/lavender-ml/lavender/webhook"
)

// TestFlagDuration: a default is written as a person would type it.
func TestFlagDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{10 * time.Second, "10s"},
		{60 * time.Second, "60s"},
		{90 * time.Second, "90s"},
		{1500 * time.Millisecond, "1.5s"},
		{2 * time.Minute, "2m"},
		{10 * time.Minute, "10m"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{2*time.Minute + 5*time.Second, "2m5s"},
	} {
		if got := flagDuration(tc.d); got != tc.want {
			t.Errorf("flagDuration(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestFlagVars: every group of defaults is in the one map, from the
// packages that own them.
func TestFlagVars(t *testing.T) {
	vars := FlagVars()
	for name, want := range map[string]string{
		"runtime_gogc":           fmt.Sprint(DefaultGOGC),
		"bark_timeout":           flagDuration(delivery.DefaultTimeout),
		"watchdog_interval":      flagDuration(watchdog.DefaultInterval),
		"watchdog_shm":           DefaultShm,
		"watchdog_disk_min_free": watchdog.DefaultDiskMinFree,
	} {
		if got := vars[name]; got != want {
			t.Errorf("FlagVars()[%q] = %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"bark_level_events", "bark_levels"} {
		if vars[name] == "" {
			t.Errorf("FlagVars() has no %q", name)
		}
	}
	vars["runtime_gogc"] = "changed"
	if FlagVars()["runtime_gogc"] != fmt.Sprint(DefaultGOGC) {
		t.Error("FlagVars returns a map its caller's changes reach")
	}
}

// TestDiskPaths: every --watchdog.disk and then --watchdog.shm, absolute,
// in order; an empty one is left out.
func TestDiskPaths(t *testing.T) {
	wd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	got, err := DiskPaths([]string{"/data", "ckpt", ""}, "/dev/shm")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/data", filepath.Join(wd, "ckpt"), "/dev/shm"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("DiskPaths = %q, want %q", got, want)
	}
	if got, err := DiskPaths(nil, ""); err != nil || len(got) != 0 {
		t.Errorf("DiskPaths(nil, \"\") = %q, %v; want none", got, err)
	}
}

// TestNewWatchdogOptions: the watchdog's options from its flags, and the
// flag named in each refusal.
func TestNewWatchdogOptions(t *testing.T) {
	o, err := NewWatchdogOptions(watchdog.DefaultRuleFlags, []string{"", "failed", ""}, 20*time.Minute, "5%")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Phase.Notify) != 1 || o.Phase.Notify[0] != "failed" {
		t.Errorf("Phase.Notify = %q, want [failed]", o.Phase.Notify)
	}
	if o.Phase.Retry != watchdog.DefaultInterval || o.Disk.Repeat != watchdog.DefaultRepeat || o.Phase.StallAfter != 20*time.Minute {
		t.Errorf("the phase and disk rules do not share the interval and repeat: %+v, %+v", o.Phase, o.Disk)
	}
	if o, err := NewWatchdogOptions(watchdog.DefaultRuleFlags, []string{""}, 0, "0"); err != nil || o.Phase.Notify == nil || len(o.Phase.Notify) != 0 {
		t.Errorf("an empty --phase.notify = %#v, %v; want no phase push (empty, not nil)", o.Phase.Notify, err)
	}

	negative := watchdog.DefaultRuleFlags
	negative.Interval = -time.Second
	badThreshold := watchdog.DefaultRuleFlags
	badThreshold.Threshold = 2
	for _, tc := range []struct {
		name    string
		rules   watchdog.RuleFlags
		minFree string
		want    string
	}{
		{"negative interval", negative, "5%", "--watchdog.interval must not be negative"},
		{"bad disk floor", watchdog.DefaultRuleFlags, "lots", "--watchdog.disk-min-free"},
		{"a rule refuses", badThreshold, "5%", "--watchdog.threshold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewWatchdogOptions(tc.rules, nil, 0, tc.minFree)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestPushOptionsCheck: delivery's and the webhook's refusals name the
// flag, and a push timeout must leave the webhook room under the server's
// write timeout.
func TestPushOptionsCheck(t *testing.T) {
	valid := PushOptions{
		Delivery: delivery.Config{Timeout: 5 * time.Second},
		Webhook:  webhook.Config{Timeout: 5 * time.Second, Threshold: 0.5, MaxBodyBytes: 1 << 20},
	}
	if err := valid.Check(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*PushOptions)
		want   string
	}{
		{"no timeout", func(o *PushOptions) { o.Delivery.Timeout = 0 }, "--bark.timeout must be positive"},
		{"storm limit", func(o *PushOptions) { o.Delivery.MaxPerMinute = -1 }, "--bark.max-per-minute must be in"},
		{"external URL", func(o *PushOptions) { o.Delivery.ExternalURL = "gpu-3:9110" }, "--web.external-url must be an absolute http(s) URL"},
		{"threshold", func(o *PushOptions) { o.Webhook.Threshold = 1.5 }, "--bark.threshold must be in [0, 1]"},
		{"body cap", func(o *PushOptions) { o.Webhook.MaxBodyBytes = 0 }, "--webhook.max-bytes must be positive"},
		{"no room under the write timeout", func(o *PushOptions) { o.Delivery.Timeout = ServingTimeouts.Write }, "leaves no room under the server's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid
			tc.change(&o)
			err := o.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestCheckKmsgPath: what can never be the kernel log is refused, naming
// the flag; a missing path is no mistake in the flag (lavender runs
// blind), and "" is no kernel log at all.
func TestCheckKmsgPath(t *testing.T) {
	if err := (HostOptions{KmsgPath: t.TempDir()}).checkKmsgPath(); err == nil || !strings.HasPrefix(err.Error(), "--path.kmsg: ") {
		t.Errorf("a directory: %v, want refused naming --path.kmsg", err)
	}
	for _, path := range []string{filepath.Join(t.TempDir(), "missing"), ""} {
		if err := (HostOptions{KmsgPath: path}).checkKmsgPath(); err != nil {
			t.Errorf("%q was refused: %v", path, err)
		}
	}
}
