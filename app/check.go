package app

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/kmsg"
	"github.com/lavender-ml/lavender/runlog"
)

// The checks here run before a command starts anything, and their errors
// name the flag to fix rather than the options' field: cmd/lavender, the
// one user of app, sets every option from a flag, and a person fixes a
// flag.

// pushFlagOf names the flag of each delivery.Config and webhook.Config
// field that their Check can refuse.
var pushFlagOf = map[string]string{
	"Timeout":      "--bark.timeout",
	"Threshold":    "--bark.threshold",
	"DedupWindow":  "--bark.dedup-window",
	"MaxBodyBytes": "--webhook.max-bytes",
	"MaxPerMinute": "--bark.max-per-minute",
	"ExternalURL":  "--web.external-url",
}

// runtimeFlagOf names the flag of each RuntimeOptions field.
var runtimeFlagOf = map[string]string{"GoMaxProcs": "--runtime.gomaxprocs", "GoGC": "--runtime.gogc"}

// flagError words a *delivery.FieldError of an options struct with the
// flag flagOf names for its field; any other error is returned as it is.
func flagError(err error, flagOf map[string]string) error {
	var fe *delivery.FieldError
	if errors.As(err, &fe) && flagOf[fe.Field] != "" {
		return fmt.Errorf("%s %s", flagOf[fe.Field], fe.Problem)
	}
	return err
}

// CheckFlags is Check with its error naming the flag
// (--runtime.gomaxprocs, --runtime.gogc) rather than the field.
func (o RuntimeOptions) CheckFlags() error {
	return flagError(o.Check(), runtimeFlagOf)
}

// Check is the bridge's own check of the push options, naming the flags:
// delivery's and the webhook's checks, and the room a webhook's answer
// needs under the server's write timeout.
func (o PushOptions) Check() error {
	err := o.Delivery.Check()
	if err == nil {
		err = o.Webhook.Check()
	}
	if err != nil {
		return flagError(err, pushFlagOf)
	}
	timeout := o.Delivery.Timeout
	if timeout+WebhookMargin > ServingTimeouts.Write {
		return fmt.Errorf("--bark.timeout %s leaves no room under the server's %s write timeout; use at most %s",
			timeout, ServingTimeouts.Write, ServingTimeouts.Write-WebhookMargin)
	}
	return nil
}

// Check is runlog's own check of the cap, naming the flag.
func (o RunlogOptions) Check() error {
	if err := runlog.CheckMaxBytes(o.MaxBytes); err != nil {
		return fmt.Errorf("--runlog.max-bytes %w", err)
	}
	return nil
}

// checkStep refuses a status page's chart whose points are no time apart.
func (o HostOptions) checkStep() error {
	if o.HistoryStep <= 0 {
		return fmt.Errorf("--status.history-step must be positive, not %s", o.HistoryStep)
	}
	return nil
}

// checkKmsgPath refuses, before anything starts, a --path.kmsg that can
// never be the kernel log (/dev/zero would be read for ever, a directory
// never): a mistake in the flag, unlike a log lavender may not read. ""
// (no kernel log) and a path that does not exist pass.
func (o HostOptions) checkKmsgPath() error {
	if o.KmsgPath == "" {
		return nil
	}
	if err := kmsg.Check(o.KmsgPath); err != nil {
		return fmt.Errorf("--path.kmsg: %w", err)
	}
	return nil
}

// DiskPaths are the fixed filesystems to watch, HostOptions.DiskPaths:
// every --watchdog.disk, then --watchdog.shm unless it is empty, made
// absolute, in order.
func DiskPaths(disks []string, shm string) ([]string, error) {
	var out []string
	for _, p := range append(slices.Clone(disks), shm) {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("--watchdog.disk %q: %w", p, err)
		}
		out = append(out, abs)
	}
	return out, nil
}

// Check refuses, naming the flag, what the exporter cannot start with,
// in the order the exporter has always checked its flags.
func (o ExporterOptions) Check() error {
	if err := o.Host.checkStep(); err != nil {
		return err
	}
	if err := o.Runlog.Check(); err != nil {
		return err
	}
	return o.Host.checkKmsgPath()
}

// Check refuses, naming the flag, what the bridge cannot start with.
func (o BridgeOptions) Check() error {
	if err := o.Push.Check(); err != nil {
		return err
	}
	return o.Runlog.Check()
}

// Check refuses, naming the flag, what serve cannot start with: the push,
// the host and the run-log options. The watchdog's options are checked as
// they are made (NewWatchdogOptions), the levels as they are parsed, after
// these.
func (o ServeOptions) Check() error {
	if err := o.Push.Check(); err != nil {
		return err
	}
	if err := o.Host.checkStep(); err != nil {
		return err
	}
	if err := o.Host.checkKmsgPath(); err != nil {
		return err
	}
	return o.Runlog.Check()
}
