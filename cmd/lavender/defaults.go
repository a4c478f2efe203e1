package main

import (
	"fmt"
	"maps"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/lavender-ml/lavender/app"
	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/exporter"
	"github.com/lavender-ml/lavender/heartbeat"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/pushtext"
	"github.com/lavender-ml/lavender/runlog"
	"github.com/lavender-ml/lavender/watchdog"
	"github.com/lavender-ml/lavender/webguard"
	"github.com/lavender-ml/lavender/webhook"
)

// defaultVars are the flags' defaults, from the constants of the packages
// that own them, so a default is written once (the watchdog's are in
// watchdogVars). Flags whose default is cmd's own (log level and format,
// runtime settings) keep it in their tag.
var defaultVars = kong.Vars{
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
	"runtime_gogc":        fmt.Sprint(app.DefaultGOGC),
}

// flagDefaults writes every ${name} of defaultVars, watchdogVars, diskVars
// and barkLevelVars into the model's tags, as kong's own interpolation
// would, before kong interpolates the rest (${default}, ${enum}). Given to
// kong as Vars they would cost every command, `phase ping` included, about
// 10 ms and 4.6 MB of garbage at start: kong copies and expands every
// variable again for each of the CLI's few hundred flag values.
func flagDefaults() kong.Option {
	vars := map[string]string{}
	maps.Copy(vars, defaultVars)
	maps.Copy(vars, watchdogVars)
	maps.Copy(vars, diskVars)
	maps.Copy(vars, barkLevelVars())
	pairs := make([]string, 0, 2*len(vars))
	for name, value := range vars {
		// kong reads the result again: "$$" is its escaped "$".
		pairs = append(pairs, "${"+name+"}", strings.ReplaceAll(value, "$", "$$"))
	}
	expand := strings.NewReplacer(pairs...).Replace
	return kong.PostBuild(func(k *kong.Kong) error {
		return kong.Visit(k.Model.Node, func(v kong.Visitable, next kong.Next) error {
			switch v := v.(type) {
			case *kong.Node:
				v.Help = expand(v.Help)
			case *kong.Value:
				v.Default, v.Enum, v.Help = expand(v.Default), expand(v.Enum), expand(v.Help)
				for i, env := range v.Tag.Envs {
					v.Tag.Envs[i] = expand(env)
				}
				if v.Flag != nil {
					v.Flag.PlaceHolder = expand(v.Flag.PlaceHolder)
				}
			}
			return next(nil)
		})
	})
}
