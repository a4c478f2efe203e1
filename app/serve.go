package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/common/version"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/diskguard"
	"github.com/lavender-ml/lavender/exporter"
	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/kmsg"
	"github.com/lavender-ml/lavender/phaseserver"
	"github.com/lavender-ml/lavender/runlog"
	"github.com/lavender-ml/lavender/statuspage"
	"github.com/lavender-ml/lavender/watchdog"
)

// WatchdogOptions are serve's built-in watchdog: its interval (0: off, the
// status page is then sampled every history step) and each rule group's
// configuration, as the watchdog's constructors take them.
type WatchdogOptions struct {
	Interval time.Duration
	Rules    watchdog.RuleFlags
	Phase    watchdog.PhaseConfig
	Disk     watchdog.DiskConfig
}

func (o WatchdogOptions) enabled() bool { return o.Interval > 0 }

// ServeOptions are lavender serve's.
type ServeOptions struct {
	Web      WebOptions
	Runlog   RunlogOptions
	Host     HostOptions
	Push     PushOptions
	Watchdog WatchdogOptions
	// RunHeader is the new run's header line; "": "device=… lavender=v…".
	RunHeader string
	// RunResume keeps appending to the current run instead of starting one.
	RunResume bool
}

// RunServe is the whole product in one process until ctx ends: it binds
// the listeners, opens the phase server and the pushing, builds the
// watchdog, opens the run, registers the pages, and serves, recording RUN
// stop at the end.
func RunServe(ctx context.Context, o ServeOptions, env Env) error {
	srv, err := newCommandServer(o.Web, env.Logger, env.OnListen)
	if err != nil {
		return err
	}
	defer srv.close()
	exp, closeExp, err := openPhaseServer(o.Host, o.Runlog, env, srv)
	if err != nil {
		return err
	}
	defer closeExp()
	p, stopReload, err := openPushing(o.Push, o.Runlog, env, srv)
	if err != nil {
		return err
	}
	defer stopReload()
	grace := o.Push.Delivery.Timeout + WebhookMargin
	stopStorm := runDelivery(ctx, p.delivery, grace)
	defer stopStorm()
	keepState, releaseState := lockServeState(o.Runlog.LogsDir(), env.Logger)
	defer releaseState()
	var pos *kernelLogPosition
	var from kmsg.From
	if o.Host.KmsgPath != "" && keepState {
		pos, from = openKernelLogPosition(o.Runlog.LogsDir(), o.Host.ProcFS, env.Logger)
	}
	klog := openKernelLog(o.Host.KmsgPath, env.Logger, srv.reg, pos, from)
	defer klog.close()
	gpus, err := openGPUs(o.Host.GPU, env, srv.reg)
	if err != nil {
		return err
	}
	defer gpus.close()
	if err := srv.reg.Register(newPhaseGPUCollector(o.Host.ProcFS, exp, gpus)); err != nil {
		return err
	}
	guard, err := openDiskGuard(o.Host.DiskPaths, exp, env, srv.reg)
	if err != nil {
		return err
	}
	history := watchdog.NewHistory(o.Host.HistoryStep)
	var carried []watchdog.OpenIncident
	var onOpen func([]watchdog.OpenIncident)
	if o.Watchdog.enabled() && keepState {
		var state *watchdogState
		state, carried = openWatchdogState(o.Runlog.LogsDir(), env.Logger)
		onOpen = state.save
	}
	wd, err := newWatchdog(o.Watchdog, watchdog.WithDisks(hostReader(o.Host.ProcFS, klog, exp, gpus), guard.Latest), history, p.watchdog, onOpen, env, srv)
	if err != nil {
		return err
	}
	// Before the first poll: an incident still open goes on as the same
	// notification, and one that ended while serve was down is resolved.
	wd.Restore(carried)
	// The kernel log and NVML both report an Xid; the first report of one
	// reaches the watchdog.
	var xids gpu.XidDedup
	faults := watchFaults(exp, wd, env.Clock)
	klog.handlers = append(klog.handlers, firstXids(&xids, env.now(), faults))
	gpus.watchXids(ctx, &xids, faults, env.Logger)

	openRun(o, exp, env)
	exp.Register(srv.mux)
	p.register(srv.mux)
	page := statusPage(o, wd, p.delivery, history)
	page.KernelLog = klog.status
	page.Disks = guard.Latest
	page.GPUs, page.GPUsOff = gpus.snapshot(), gpus.off
	if err := registerStatusPage(srv.mux, exp, page); err != nil {
		return err
	}

	err = serveWatched(ctx, o, srv, wd, klog, guard, env, func() {
		env.Logger.Info("lavender serve ready", "version", version.Info(), "targets", len(p.delivery.Targets()),
			"watchdog_interval", o.Watchdog.Interval, "runlog_dir", o.Runlog.Dir)
		if env.OnReady != nil {
			env.OnReady()
		}
	})
	stopStorm() // held alerts go out, with their BARK line, before RUN stop
	if logErr := exp.AppendToRun(runlog.RunStop); logErr != nil {
		env.Logger.Error("run log: RUN stop not written", "err", logErr)
	}
	return err
}

// NewWatchdogOptions are the watchdog's options from serve's flags: the
// rules' (whose Interval and Repeat the phase and disk rules share), the
// phase events to push (--phase.notify), the stall timeout and the disk
// floor as typed (--watchdog.disk-min-free). It checks every value, even
// with the watchdog off, so a bad one never passes silently; errors name
// the flag.
func NewWatchdogOptions(rules watchdog.RuleFlags, phaseNotify []string, stallAfter time.Duration, diskMinFree string) (WatchdogOptions, error) {
	if rules.Interval < 0 {
		return WatchdogOptions{}, fmt.Errorf("--watchdog.interval must not be negative, not %s", rules.Interval)
	}
	// Never nil: an empty --phase.notify means no phase push, not the
	// default list.
	notify := []string{}
	for _, n := range phaseNotify {
		if n != "" {
			notify = append(notify, n)
		}
	}
	floor, err := watchdog.ParseMinFree(diskMinFree)
	if err != nil {
		return WatchdogOptions{}, err
	}
	o := WatchdogOptions{
		Interval: rules.Interval,
		Rules:    rules,
		Phase: watchdog.PhaseConfig{
			Notify:     notify,
			StallAfter: stallAfter,
			Repeat:     rules.Repeat,
			Retry:      rules.Interval,
		},
		Disk: watchdog.DiskConfig{MinFree: floor, Repeat: rules.Repeat, Retry: rules.Interval},
	}
	if _, err := o.BuildRules(); err != nil {
		return WatchdogOptions{}, err
	}
	return o, nil
}

// BuildRules builds the watchdog's rules from o, the same every time: serve
// builds them at start, and NewWatchdogOptions first, to refuse a bad flag.
func (o WatchdogOptions) BuildRules() ([]watchdog.Rule, error) {
	rules, err := watchdog.NewRules(o.Rules)
	if err != nil {
		return nil, err
	}
	phase, err := watchdog.NewPhaseRules(o.Phase)
	if err != nil {
		return nil, err
	}
	disk, err := watchdog.NewDiskRule(o.Disk)
	if err != nil {
		return nil, err
	}
	return append(append(rules, phase...), disk), nil
}

// newWatchdog builds the one sampler that feeds the status page's history
// and, when on, the watchdog's rules, so the page costs no reads of its
// own: with the watchdog on, the rules, the pusher and the metrics; off, a
// sampler for the status page alone, every history step, with no rules
// and no watchdog metrics. onOpen keeps the open incidents across a
// restart.
func newWatchdog(o WatchdogOptions, read watchdog.Reader, history *watchdog.History, push watchdog.Pusher, onOpen func([]watchdog.OpenIncident), env Env, srv *commandServer) (*watchdog.Watchdog, error) {
	rules, err := o.BuildRules()
	if err != nil {
		return nil, err
	}
	if !o.enabled() {
		return watchdog.New(watchdog.Config{Interval: history.Step(), Read: read, History: history, Now: env.Clock})
	}
	return watchdog.New(watchdog.Config{
		Interval: o.Interval, Read: read, Rules: rules, Push: push,
		History: history, Logger: env.Logger, Registerer: srv.reg, Now: env.Clock, OnOpen: onOpen,
	})
}

// openRun starts a new run, or with RunResume records that the process
// came back to the current one. A full or read-only logs dir loses the
// record, never the pushes: serve starts anyway, and later writes are
// counted in lavender_runlog_write_errors_total.
func openRun(o ServeOptions, exp *phaseserver.Server, env Env) {
	device := exporter.Device()
	if run, _ := exp.Snapshot(); o.RunResume && run != nil {
		// Entries after the last RUN stop must say the process came back.
		if err := exp.AppendToRun(runlog.RunResume + "  device=" + device); err != nil {
			env.Logger.Error("run log: RUN resume not written", "err", err)
		}
		return
	}
	header := o.RunHeader
	if header == "" {
		header = fmt.Sprintf("device=%s lavender=v%s", device, version.Version)
	}
	if _, err := exp.StartRun(header, runlog.RunStart+"  device="+device); err != nil {
		env.Logger.Error("run log not started; serving anyway", "err", err)
	}
}

// statusPage is what serve's status page shows beyond the phase server:
// the watchdog's history and rule states, the pipeline's status, and the
// thresholds in force (the watchdog's when it is on, else the webhook's).
func statusPage(o ServeOptions, wd *watchdog.Watchdog, d *delivery.Pipeline, history *watchdog.History) statuspage.Config {
	threshold, pressureThreshold := o.Push.Webhook.Threshold, watchdog.DefaultPressureThreshold
	if o.Watchdog.enabled() {
		threshold = o.Watchdog.Rules.Threshold
		if o.Watchdog.Rules.PressureThreshold > 0 {
			pressureThreshold = o.Watchdog.Rules.PressureThreshold
		}
	}
	return statuspage.Config{
		History:           history,
		Rules:             wd.State,
		Bark:              d.Status,
		Threshold:         threshold,
		PressureThreshold: pressureThreshold,
		// The page's stalled mark and the stalled push agree: 0 turns
		// both off.
		StallAfter:  o.Watchdog.Phase.StallAfter,
		DiskMinFree: o.Watchdog.Disk.MinFree,
	}
}

// serveWatched serves HTTP and runs the watchdog until ctx ends. The first
// poll comes before ready, so a host that is already paging gets its push
// at once, and the OOM rule has its baseline: kills from before the start
// never push. The last comes once HTTP has stopped (PollAtStop). ready is
// called once the command is ready.
func serveWatched(ctx context.Context, o ServeOptions, srv *commandServer, wd *watchdog.Watchdog, klog *kernelLog, guard *diskguard.Guard, env Env, ready func()) error {
	served := make(chan error, 1)
	go func() {
		// In-flight webhooks wait on the channels for at most the timeout:
		// let them finish so a push a service accepted is answered 200,
		// not retried.
		served <- srv.serve(ctx, o.Push.Delivery.Timeout+WebhookMargin, env.Logger)
	}()
	// The disks are read apart from the watchdog's poll, which takes the
	// guard's last readings: a hung filesystem never delays a push.
	diskInterval := o.Host.HistoryStep
	if o.Watchdog.enabled() {
		diskInterval = o.Watchdog.Interval
	}
	diskPolls := guard.Start(ctx, diskInterval)
	defer diskPolls.Wait()
	wd.Poll(ctx)
	diskPolls.AwaitFirst(ctx)
	var background sync.WaitGroup
	background.Go(func() { wd.Run(ctx) })
	background.Go(func() { klog.run(ctx, env.Logger) })
	srv.ready.Set()
	ready()
	err := <-served
	background.Wait()
	if o.Watchdog.enabled() {
		// No heartbeat comes any more, and delivery is still open (RunServe
		// closes it after this): an end accepted since the last poll, or
		// held to settle, is pushed now, within the stop's grace, or never.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Push.Delivery.Timeout+WebhookMargin)
		wd.PollAtStop(stopCtx)
		cancel()
	}
	return err
}
