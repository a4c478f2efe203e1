package app

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/exporter"
	"github.com/lavender-ml/lavender/heartbeat"
	"github.com/lavender-ml/lavender/kmsg"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/runlog"
	"github.com/lavender-ml/lavender/watchdog"
	"github.com/lavender-ml/lavender/webguard"
	"github.com/lavender-ml/lavender/webhook"
)

// DefaultShm is where the shared memory DataLoader workers use lives.
const DefaultShm = "/dev/shm"

// defaultVars are the flags' defaults, from the constants of the packages
// that own them, so a default is written once (the watchdog's are in
// watchdogVars). Flags whose default is cmd's own (log level and format,
// runtime settings) keep it in their tag.
var defaultVars = map[string]string{
	"runlog_dir":          runlog.DefaultDir,
	"runlog_max_bytes":    fmt.Sprint(runlog.DefaultMaxBytes),
	"runlog_min_bytes":    fmt.Sprint(runlog.MinMaxBytes),
	"bark_config_dir":     delivery.DefaultConfigDir,
	"bark_timeout":        flagDuration(delivery.DefaultTimeout),
	"bark_prefix":         pushtext.DefaultPrefix,
	"bark_threshold":      fmt.Sprint(webhook.DefaultThreshold),
	"bark_swap_alertname": webhook.DefaultSwapAlertname,
	"bark_dedup_window":   flagDuration(delivery.DefaultDedupWindow),
	"bark_max_per_minute": fmt.Sprint(delivery.DefaultMaxPerMinute),
	"webhook_max_bytes":   fmt.Sprint(webhook.DefaultMaxBodyBytes),
	"procfs":              exporter.DefaultProcFS,
	"history_step":        flagDuration(watchdog.DefaultStep),
	"port":                phaseapi.DefaultPort,
	"listen_address":      ":" + phaseapi.DefaultPort,
	"write_allow":         strings.Join(webguard.DefaultWriteAllow, ","),
	"phase_url":           heartbeat.DefaultURL,
	"phase_timeout":       flagDuration(heartbeat.DefaultTimeout),
	"phase_every":         flagDuration(heartbeat.DefaultPingInterval),
	"runtime_gogc":        fmt.Sprint(DefaultGOGC),
}

// watchdogVars are the watchdog's flags' defaults, from the packages that
// own them.
var watchdogVars = map[string]string{
	"watchdog_interval":           flagDuration(watchdog.DefaultInterval),
	"watchdog_threshold":          fmt.Sprint(watchdog.DefaultThreshold),
	"watchdog_pressure_threshold": fmt.Sprint(watchdog.DefaultPressureThreshold),
	"watchdog_repeat":             flagDuration(watchdog.DefaultRepeat),
	"watchdog_hysteresis":         fmt.Sprint(watchdog.DefaultHysteresis),
	"kmsg_path":                   kmsg.DefaultPath,
	"phase_notify":                strings.Join(watchdog.DefaultPhaseNotify, ","),
	"phase_stall_after":           flagDuration(watchdog.DefaultStallAfter),
	"watchdog_gpu_hang_after":     flagDuration(watchdog.DefaultGPUHangAfter),
	"watchdog_gpu_idle_after":     flagDuration(watchdog.DefaultGPUIdleAfter),
	"watchdog_gpu_slowdown_after": flagDuration(watchdog.DefaultGPUSlowdownAfter),
}

// diskVars are the disk flags' defaults.
var diskVars = map[string]string{
	"watchdog_shm":           DefaultShm,
	"watchdog_disk_min_free": watchdog.DefaultDiskMinFree,
}

// barkLevelVars name the events and levels in --bark.level's help.
func barkLevelVars() map[string]string {
	return map[string]string{
		"bark_level_events": pushtext.EventList(),
		"bark_levels":       strings.Join(bark.Levels, ", "),
	}
}

// FlagVars are the values of every ${name} in cmd/lavender's flag tags
// (defaults, placeholders, help): defaultVars, watchdogVars, diskVars and
// barkLevelVars, in one new map.
func FlagVars() map[string]string {
	vars := map[string]string{}
	maps.Copy(vars, defaultVars)
	maps.Copy(vars, watchdogVars)
	maps.Copy(vars, diskVars)
	maps.Copy(vars, barkLevelVars())
	return vars
}

// flagDuration writes a default as a person would type it: "10m", not
// time.Duration's "10m0s", and "60s" rather than "1m" under two minutes.
func flagDuration(d time.Duration) string {
	if d < 2*time.Minute && d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
