package watchdog

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/gpu"
	"github.com/lavender-ml/lavender/internal/testkit"
	"github.com/lavender-ml/lavender/phaseapi"
)

// box is a simulated 8-GPU training box: one phase, "Pretrain 1/3", whose
// launcher (pid 100) runs a rank on each GPU (pids 101–108), and a
// monitoring process of another user (pid 300) on every GPU. Its tick
// moves the run on by one poll and returns the sample the sampler would
// read; scene says what the box does at each moment of the run.
type box struct {
	phase   phaseapi.Phase
	devs    []gpu.Device
	gpuErr  error
	running bool
	ranks   bool // the ranks hold their GPUs
	steps   bool // the phase reports steps (false: a wrapped command)
}

// activity is what the run does at one moment, set by a scene.
type activity int

const (
	loading    activity = iota // model loading: no step yet, GPUs idle
	training                   // steps advance, GPUs busy at high power
	evalLoop                   // evaluation loop: small batches, busy GPUs at low power, eval_step moves
	evalBusy                   // compute_metrics on the CPU: GPUs idle, busy "evaluating"
	saving                     // checkpoint save: GPUs idle, busy "saving"
	slowStep                   // a step waits on a straggler: GPUs spin in a collective, no new step
	loaderWait                 // the data loader is behind: GPUs idle, no new step
	hung                       // a hung collective: GPUs spin, no progress ever
	idleHang                   // a hung data loader: GPUs idle, no progress ever
)

var parentsOfRanks = map[int]int{100: 10, 10: 1, 300: 1, 101: 100, 102: 100, 103: 100, 104: 100, 105: 100, 106: 100, 107: 100, 108: 100}

func newBox(start time.Time, steps bool) *box {
	b := &box{running: true, steps: steps}
	b.phase = phaseapi.Phase{Name: "Pretrain 1/3", Status: phaseapi.StatusActive, Started: start, LastHeartbeat: start}
	b.phase.PID = 100
	if steps {
		b.phase.Total = 200000
	}
	for i := range 8 {
		b.devs = append(b.devs, gpu.Device{Index: i, UUID: fmt.Sprintf("GPU-%d", i), BusID: fmt.Sprintf("0000:%02x:00", 0x18+i*0x10), Name: "NVIDIA H200",
			Supported: gpu.FieldUtilization | gpu.FieldMemory | gpu.FieldPower | gpu.FieldPowerLimit | gpu.FieldTemperature |
				gpu.FieldClockEvents | gpu.FieldECC | gpu.FieldRemappedRows | gpu.FieldProcesses,
			PowerLimitW: 700, MemTotal: 141 << 30, ECCVolatileUncorrected: 2, ECCAggregateUncorrected: 7,
			RemappedRows: gpu.RemappedRows{Correctable: 3}})
	}
	return b
}

// jitter is a deterministic spread of a poll's readings, 0..n-1.
func jitter(el time.Duration, gpuIdx, n int) int {
	x := uint64(el/time.Second)*2654435761 + uint64(gpuIdx)*40503
	x ^= x >> 13
	return int(x % uint64(n))
}

// tick moves the box to el (since the phase's start) doing act, and
// returns the sample of the poll. A heartbeat comes every minute, as
// the client sends them, carrying what the run did since the last.
func (b *box) tick(now time.Time, el time.Duration, act activity) Sample {
	heartbeat := b.running && el%time.Minute == 0 && el > 0
	if heartbeat {
		b.phase.LastHeartbeat = now
		b.phase.Heartbeats++
		switch {
		case !b.steps:
		case act == training:
			step := b.phase.StepNow() + 60*9
			b.phase.Step, b.phase.ProgressAt = &step, now
		case act == evalLoop:
			e := uint64(0)
			if b.phase.EvalStep != nil {
				e = *b.phase.EvalStep + 40
			}
			b.phase.EvalStep, b.phase.EvalProgressAt = &e, now
		case act == evalBusy:
			b.phase.Busy, b.phase.BusyAt = "evaluating", now
		case act == saving:
			b.phase.Busy, b.phase.BusyAt = "saving", now
		}
	}
	for i := range b.devs {
		d := &b.devs[i]
		d.Pids = []uint32{300}
		if b.running && b.ranks {
			d.Pids = []uint32{uint32(101 + i), 300}
		}
		d.ClockEventReasons = 0
		d.TempC = uint32(45 + jitter(el, i, 5))
		switch act {
		case training:
			d.SMUtil, d.PowerW = uint32(95+jitter(el, i, 6)), float64(560+jitter(el, i, 130))
			d.TempC = uint32(70 + jitter(el, i, 12))
			if jitter(el, i, 2) == 0 {
				d.ClockEventReasons = gpu.ReasonSWPowerCap // normal at full load
			}
		case evalLoop, slowStep, hung:
			// Small batches, or a kernel spinning in a collective: busy
			// to NVML, at little power.
			d.SMUtil, d.PowerW = uint32(92+jitter(el, i, 9)), float64(90+jitter(el, i, 80))
		default: // loading, evalBusy, saving, loaderWait, idleHang
			d.SMUtil, d.PowerW = uint32(jitter(el, i, 4)), float64(72+jitter(el, i, 15))
			d.ClockEventReasons = gpu.ReasonGpuIdle
		}
		if !b.running {
			d.SMUtil, d.PowerW, d.ClockEventReasons = 0, 70, gpu.ReasonGpuIdle
		}
	}
	s := Sample{Time: now, Phases: []phaseapi.Phase{b.phase}, GPUErr: b.gpuErr}
	if b.gpuErr == nil {
		// Each poll hands out its own copy: a Sample is never changed
		// once recorded, and the box changes its devices.
		s.GPUs = append([]gpu.Device(nil), b.devs...)
	}
	s.PhaseGPUs = PhaseGPUs(s.Phases, s.GPUs, nil, func(pid int) int { return parentsOfRanks[pid] })
	return s
}

// healthyScene is six hours of a healthy run, as a box does it: loading,
// then training with an evaluation every hour (a 7-minute loop of small
// batches, busy at low power, then 4 minutes of metrics on the CPU), a
// 12-minute checkpoint save every two
// hours, a slow step that waits 4 minutes on a straggler, a data loader
// that falls 3 minutes behind, 2 minutes of the power brake, 90 seconds
// of thermal slowdown on one GPU, and now and then an NVML pass that
// fails. Each of these looks, for a while, like a fault a GPU rule is
// for; none lasts as long as the rule waits, or the phase says what it
// does.
func healthyScene(el time.Duration, b *box) activity {
	b.gpuErr = nil
	if el%(47*time.Minute) == 0 && el > 0 {
		b.gpuErr = errors.New("gpu reader closed")
	}
	b.ranks = el >= time.Minute
	hour, min := el/time.Hour, el%time.Hour
	act := training
	switch {
	case el < 3*time.Minute:
		act = loading
	case hour >= 1 && min < 7*time.Minute:
		act = evalLoop
	case hour >= 1 && min < 11*time.Minute:
		act = evalBusy
	case hour%2 == 0 && hour > 0 && min >= 15*time.Minute && min < 27*time.Minute:
		act = saving
	case hour == 1 && min >= 30*time.Minute && min < 34*time.Minute:
		act = slowStep
	case hour == 3 && min >= 30*time.Minute && min < 33*time.Minute:
		act = loaderWait
	}
	return act
}

// healthyExtras are the readings a scene sets after the box's: the
// brief slowdowns.
func healthyExtras(el time.Duration, s *Sample) {
	for i := range s.GPUs {
		d := &s.GPUs[i]
		if el >= 2*time.Hour+45*time.Minute && el < 2*time.Hour+47*time.Minute {
			d.ClockEventReasons |= gpu.ReasonHWPowerBrakeSlowdown | gpu.ReasonHWSlowdown
		}
		if i == 3 && el >= 5*time.Hour+20*time.Minute && el < 5*time.Hour+21*time.Minute+30*time.Second {
			d.ClockEventReasons |= gpu.ReasonHWThermalSlowdown | gpu.ReasonHWSlowdown
			d.TempC = 91
		}
	}
}

// fault changes a healthy run from one moment on: the activity it makes
// the box do (or the healthy one), and the readings it changes.
type fault struct {
	act      func(el time.Duration, healthy activity) activity
	readings func(el time.Duration, b *box, s *Sample)
}

// runBox polls rules every DefaultInterval over a run of length total on a
// fake clock, the phase ending ok at end (0: it runs on), and returns
// every alert they raised; every push is delivered.
func runBox(t *testing.T, rules []Rule, total, end time.Duration, steps bool, f fault) []Alert {
	t.Helper()
	clock := testkit.NewClock(t0)
	b := newBox(t0, steps)
	var out []Alert
	for el := time.Duration(0); el <= total; el += DefaultInterval {
		clock.Set(t0.Add(el))
		now := clock.Now()
		if end > 0 && el >= end && b.running {
			b.running = false
			b.phase.Status, b.phase.Ended = phaseapi.StatusOK, now
		}
		act := healthyScene(el, b)
		if f.act != nil {
			act = f.act(el, act)
		}
		s := b.tick(now, el, act)
		healthyExtras(el, &s)
		if f.readings != nil && len(s.GPUs) > 0 {
			f.readings(el, b, &s)
		}
		for _, r := range rules {
			for _, a := range r.Observe(s, now) {
				out = append(out, a)
				r.Pushed(a, true, now)
			}
		}
	}
	return out
}

// allRules is the whole rule set with its defaults: the watchdog's own
// (the GPU rules among them) and the phase rules that can push while a
// phase runs.
func allRules(t *testing.T) []Rule {
	t.Helper()
	rules, err := NewRules(DefaultRuleFlags)
	if err != nil {
		t.Fatal(err)
	}
	phase, err := NewPhaseRules(PhaseConfig{Notify: []string{string(RuleFailed), string(RuleStalled), string(RuleLoss)}, StallAfter: DefaultStallAfter})
	if err != nil {
		t.Fatal(err)
	}
	return append(rules, phase...)
}

// TestHealthyRunPushesNothing: six hours of a healthy 8-GPU run, polled
// every 5 s with every rule on, push nothing: the evaluation's low power
// at full utilization, a 12-minute save on idle GPUs, a slow step, a late
// data loader, the power cap, a short power brake and thermal slowdown,
// failed NVML passes, the phase's end and the idle GPUs after it.
func TestHealthyRunPushesNothing(t *testing.T) {
	for _, steps := range []bool{true, false} {
		t.Run(fmt.Sprintf("steps=%v", steps), func(t *testing.T) {
			scene := fault{}
			if !steps {
				// A wrapped command tells nothing of its work, so the
				// rules have only the GPUs: it must not idle or spin
				// for as long as they wait.
				scene.act = func(el time.Duration, act activity) activity {
					switch act {
					case evalLoop:
						return training
					case saving:
						if el%time.Hour >= 17*time.Minute {
							return training
						}
					}
					return act
				}
			}
			for _, a := range runBox(t, allRules(t), 6*time.Hour+15*time.Minute, 6*time.Hour, steps, scene) {
				t.Errorf("pushed %s", describeGPU(a))
			}
		})
	}
}

// describeGPU is describe with the alert's GPUs.
func describeGPU(a Alert) string {
	s := fmt.Sprintf("%s at+%s", describe(a), a.At.Sub(t0))
	if len(a.GPU.Devices) > 0 {
		s += fmt.Sprintf(" gpus=%v", a.GPU.Indexes())
	}
	if a.GPU.NewECC > 0 {
		s += fmt.Sprintf(" ecc+%d", a.GPU.NewECC)
	}
	if a.GPU.NoSteps {
		s += " nosteps"
	}
	return s
}

// TestGPUFaultPushesOnceAndResolvesOnce: each fault, in the middle of a
// healthy run, pushes once when it has lasted its rule's time and once
// more when it is over, and no other GPU rule pushes.
func TestGPUFaultPushesOnceAndResolvesOnce(t *testing.T) {
	at := 100 * time.Minute // after the first evaluation, before the first save
	during := func(el time.Duration, from, to time.Duration) bool { return el >= at+from && el < at+to }
	for _, tc := range []struct {
		name  string
		rule  RuleName
		steps bool
		f     fault
		want  []string
	}{
		{"a hung collective, until the straggler comes back", RuleGPUHang, true, fault{act: func(el time.Duration, act activity) activity {
			if during(el, 0, 12*time.Minute) {
				return hung
			}
			return act
		}}, []string{
			`gpu-hang firing began+1h40m0s phase="Pretrain 1/3" at+1h45m0s gpus=[0 1 2 3 4 5 6 7]`,
			`gpu-hang resolved began+1h40m0s phase="Pretrain 1/3" at+1h52m0s gpus=[0 1 2 3 4 5 6 7]`,
		}},
		{"a hung collective in a wrapped command, which then is killed", RuleGPUHang, false, fault{act: func(el time.Duration, act activity) activity {
			if el >= at {
				return hung
			}
			if act != loading {
				return training
			}
			return act
		}}, []string{
			`gpu-hang firing began+1h40m0s phase="Pretrain 1/3" at+1h45m0s gpus=[0 1 2 3 4 5 6 7] nosteps`,
			`gpu-hang resolved began+1h40m0s phase="Pretrain 1/3" at+2h0m0s gpus=[0 1 2 3 4 5 6 7] nosteps`,
		}},
		{"idle GPUs, until the data loader comes back", RuleGPUIdle, true, fault{act: func(el time.Duration, act activity) activity {
			if during(el, 0, 15*time.Minute) {
				return idleHang
			}
			return act
		}}, []string{
			`gpu-idle firing began+1h40m0s phase="Pretrain 1/3" at+1h50m0s gpus=[0 1 2 3 4 5 6 7]`,
			`gpu-idle resolved began+1h40m0s phase="Pretrain 1/3" at+1h55m0s gpus=[0 1 2 3 4 5 6 7]`,
		}},
		{"a GPU lost, answering again after a reset", RuleGPULost, true, fault{readings: func(el time.Duration, b *box, s *Sample) {
			if during(el, 0, 20*time.Minute) {
				s.GPUs[5] = gpu.Device{Index: 5, UUID: "GPU-5", BusID: "0000:68:00", Name: "NVIDIA H200", Lost: true}
				s.PhaseGPUs = PhaseGPUs(s.Phases, s.GPUs, nil, func(pid int) int { return parentsOfRanks[pid] })
			}
		}}, []string{
			`gpu-lost firing began+1h40m0s phase="Pretrain 1/3" at+1h40m0s gpus=[5]`,
			`gpu-lost resolved began+1h40m0s phase="Pretrain 1/3" at+2h0m0s gpus=[5]`,
		}},
		{"a row remap pending until the GPU is reset", RuleGPURemap, true, fault{readings: func(el time.Duration, b *box, s *Sample) {
			if during(el, 0, 20*time.Minute) {
				s.GPUs[2].RemappedRows = gpu.RemappedRows{Correctable: 3, Uncorrectable: 1, Pending: true}
			}
		}}, []string{
			`gpu-remap firing began+1h40m0s phase="Pretrain 1/3" at+1h40m0s gpus=[2]`,
			`gpu-remap resolved began+1h40m0s phase="Pretrain 1/3" at+2h0m0s gpus=[2]`,
		}},
		{"uncorrectable ECC errors, two then one more", RuleGPUECC, true, fault{readings: func(el time.Duration, b *box, s *Sample) {
			switch {
			case during(el, 0, time.Minute):
				s.GPUs[4].ECCVolatileUncorrected = 4
			case el >= at+time.Minute:
				s.GPUs[4].ECCVolatileUncorrected = 5
			}
		}}, []string{
			`gpu-ecc firing began+1h40m0s phase="Pretrain 1/3" at+1h40m0s gpus=[4] ecc+2`,
			`gpu-ecc resolved began+1h40m0s phase="Pretrain 1/3" at+1h51m0s gpus=[4] ecc+3`,
		}},
		{"thermal slowdown of four GPUs for ten minutes", RuleGPUSlowdown, true, fault{readings: func(el time.Duration, b *box, s *Sample) {
			if during(el, 0, 10*time.Minute) {
				for i := range 4 {
					s.GPUs[i].ClockEventReasons |= gpu.ReasonHWThermalSlowdown | gpu.ReasonHWSlowdown
					s.GPUs[i].TempC = 92
				}
			}
		}}, []string{
			`gpu-slowdown firing began+1h40m0s phase="Pretrain 1/3" at+1h43m0s gpus=[0 1 2 3]`,
			`gpu-slowdown resolved began+1h40m0s phase="Pretrain 1/3" at+1h51m0s gpus=[0 1 2 3]`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end := 3 * time.Hour
			if !tc.steps {
				end = 2 * time.Hour // the hung command is killed
			}
			var got []string
			for _, a := range runBox(t, allRules(t), 3*time.Hour+10*time.Minute, end, tc.steps, tc.f) {
				switch {
				case a.Rule == tc.rule:
					got = append(got, describeGPU(a))
				case strings.HasPrefix(string(a.Rule), "gpu-"):
					t.Errorf("another GPU rule pushed: %s", describeGPU(a))
				}
			}
			if g, w := strings.Join(got, "\n"), strings.Join(tc.want, "\n"); g != w {
				t.Errorf("got\n%s\nwant\n%s", g, w)
			}
		})
	}
}

// TestGPURulesRetryAndHold: a push no target accepted is retried with a
// backoff, never as a new incident; a poll that read no GPUs starts a
// streak over but leaves a pushed incident as it is.
func TestGPURulesRetryAndHold(t *testing.T) {
	cfg := DefaultGPUConfig
	cfg.Retry = 5 * time.Second
	rules, err := NewGPURules(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var lost Rule
	for _, r := range rules {
		if r.Name() == RuleGPULost {
			lost = r
		}
	}
	dev := func(isLost bool) Sample {
		return Sample{GPUs: []gpu.Device{{Index: 0, BusID: "0000:18:00", Lost: isLost}}}
	}
	noGPUs := Sample{GPUErr: gpu.ErrClosed}
	s := 5 * time.Second
	runScript(t, lost, []step{
		{0, dev(false), false, "", "healthy"},
		{s, dev(true), true, "gpu-lost firing began+5s", "lost; every target fails"},
		{s, dev(true), true, "gpu-lost firing began+5s", "retried after 5s, fails again"},
		{s, noGPUs, false, "", "a pass that failed: the incident stays, the retry waits for a reading"},
		{s, dev(true), false, "gpu-lost firing began+5s", "retried after its 10s backoff, delivered"},
		{s, dev(true), false, "", "no reminder"},
		{s, noGPUs, false, "", "no reading ends nothing"},
		{s, dev(false), false, "gpu-lost resolved began+5s", "answers again"},
		{s, dev(false), false, "", "resolved once"},
	})

	cfg.HangAfter = time.Minute
	rules, _ = NewGPURules(cfg)
	var hang Rule
	for _, r := range rules {
		if r.Name() == RuleGPUHang {
			hang = r
		}
	}
	p := phaseapi.Phase{Name: "A", Status: phaseapi.StatusActive, Started: t0}
	spinning := Sample{Phases: []phaseapi.Phase{p}, PhaseGPUs: map[string][]int{"A": {0}},
		GPUs: []gpu.Device{{Index: 0, Supported: gpu.FieldUtilization | gpu.FieldPower | gpu.FieldPowerLimit, SMUtil: 100, PowerW: 70, PowerLimitW: 400}}}
	noLimit := spinning
	noLimit.GPUs = []gpu.Device{spinning.GPUs[0]}
	noLimit.GPUs[0].Supported &^= gpu.FieldPowerLimit
	var script []step
	for range 11 {
		script = append(script, step{s, spinning, false, "", "spinning, under a minute"})
	}
	script = append(script,
		step{s, noGPUs, false, "", "no reading: the streak starts over"},
		step{s, spinning, false, "", "streak from here"},
		step{55 * time.Second, noLimit, false, "", "without the power limit nothing is judged"},
		step{s, spinning, false, "", "streak from here again"},
		step{time.Minute, spinning, false, "gpu-hang firing began+2m5s phase=\"A\"", "a minute of spinning"},
		step{s, noGPUs, false, "", "a pushed incident waits out a failed pass"},
		step{time.Minute, noLimit, false, "", "not judged: the clear time starts"},
		step{time.Minute, noLimit, false, "gpu-hang resolved began+2m5s phase=\"A\"", "a minute without the signature"},
	)
	runScript(t, hang, script)
}

// TestGPUFlagsRefused: each duration is at least a minute, or 0.
func TestGPUFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		change func(*RuleFlags)
		want   string
	}{
		{func(f *RuleFlags) { f.GPUHangAfter = 30 * time.Second }, "--watchdog.gpu-hang-after must be at least 1m (or 0 to turn it off), not 30s"},
		{func(f *RuleFlags) { f.GPUIdleAfter = -time.Minute }, "--watchdog.gpu-idle-after must be at least 1m"},
		{func(f *RuleFlags) { f.GPUSlowdownAfter = time.Second }, "--watchdog.gpu-slowdown-after must be at least 1m"},
	} {
		f := DefaultRuleFlags
		tc.change(&f)
		if _, err := NewRules(f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one containing %q", err, tc.want)
		}
		f.GPU = false
		if _, err := NewRules(f); err != nil {
			t.Errorf("GPU rules off, yet %v", err)
		}
	}
}

// TestGPURulesBackOffWhileEveryTargetFails: a GPU rule's push that no
// target accepts is retried after --watchdog.interval, then after twice
// the last wait, never more than --watchdog.repeat apart, as the other
// rules retry. The rules come from NewRules, as serve builds them, so the
// interval is the one the flags give.
func TestGPURulesBackOffWhileEveryTargetFails(t *testing.T) {
	const (
		poll   = 5 * time.Second
		repeat = time.Minute
	)
	flags := DefaultRuleFlags
	flags.Interval, flags.Repeat = poll, repeat
	flags.GPUHangAfter, flags.GPUIdleAfter, flags.GPUSlowdownAfter = time.Minute, time.Minute, time.Minute
	phase := phaseapi.Phase{Name: "A", Status: phaseapi.StatusActive, Started: t0}
	onGPU0 := func(d gpu.Device) Sample {
		d.Index, d.BusID = 0, "0000:18:00"
		return Sample{Phases: []phaseapi.Phase{phase}, PhaseGPUs: map[string][]int{"A": {0}}, GPUs: []gpu.Device{d}}
	}
	ecc := func(n uint64) Sample { return onGPU0(gpu.Device{Supported: gpu.FieldECC, ECCVolatileUncorrected: n}) }
	for _, tc := range []struct {
		rule   RuleName
		sample func(poll int) Sample
	}{
		{RuleGPULost, func(int) Sample { return onGPU0(gpu.Device{Lost: true}) }},
		{RuleGPUECC, func(i int) Sample { return ecc(min(uint64(i), 1)) }}, // rises once, at the second poll
		{RuleGPURemap, func(int) Sample {
			return onGPU0(gpu.Device{Supported: gpu.FieldRemappedRows, RemappedRows: gpu.RemappedRows{Pending: true}})
		}},
		{RuleGPUHang, func(int) Sample {
			return onGPU0(gpu.Device{Supported: gpu.FieldUtilization | gpu.FieldPower | gpu.FieldPowerLimit, SMUtil: 100, PowerW: 70, PowerLimitW: 400})
		}},
		{RuleGPUIdle, func(int) Sample { return onGPU0(gpu.Device{Supported: gpu.FieldUtilization}) }},
		{RuleGPUSlowdown, func(int) Sample {
			return onGPU0(gpu.Device{Supported: gpu.FieldClockEvents, ClockEventReasons: gpu.ReasonHWSlowdown})
		}},
	} {
		t.Run(string(tc.rule), func(t *testing.T) {
			rules, err := NewRules(flags)
			if err != nil {
				t.Fatal(err)
			}
			var r Rule
			for _, rule := range rules {
				if rule.Name() == tc.rule {
					r = rule
				}
			}
			if r == nil {
				t.Fatalf("NewRules built no %s rule", tc.rule)
			}
			// Waits of 5s, 10s, 20s, 40s, then the 1m cap.
			want := []time.Duration{0, 5 * time.Second, 15 * time.Second, 35 * time.Second, 75 * time.Second,
				135 * time.Second, 195 * time.Second, 255 * time.Second}
			var first time.Time
			var got []time.Duration
			for i := range 100 {
				now := t0.Add(time.Duration(i) * poll)
				if !first.IsZero() && now.Sub(first) > want[len(want)-1] {
					break
				}
				for _, a := range r.Observe(tc.sample(i), now) {
					if a.Status != Firing {
						t.Fatalf("at %s: %s push, want a retry of the firing one", now.Sub(t0), a.Status)
					}
					if first.IsZero() {
						first = now
					}
					got = append(got, now.Sub(first))
					r.Pushed(a, false, now)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("tries at %v after the first, want %v", got, want)
			}
		})
	}
}

// TestNVMLStuckHoldsTheGPURules: while an NVML pass is stuck nothing of
// the GPUs is read, so no GPU's incident starts or ends, from stale
// readings or from none; after GPUStuckAfter gpu-lost pushes that NVML
// stopped answering, once, and resolves it when a pass returns.
func TestNVMLStuckHoldsTheGPURules(t *testing.T) {
	cfg := DefaultGPUConfig
	cfg.Retry = 5 * time.Second
	rules, err := NewGPURules(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := phaseapi.Phase{Name: "A", Status: phaseapi.StatusActive, Started: t0}
	read := Sample{Phases: []phaseapi.Phase{p}, PhaseGPUs: map[string][]int{"A": {0}}, GPUs: []gpu.Device{
		{Index: 0, BusID: "0000:18:00", Supported: gpu.FieldUtilization | gpu.FieldProcesses, SMUtil: 0},
		{Index: 1, BusID: "0000:2a:00", Lost: true},
	}}
	stuck := func(d time.Duration) Sample {
		return Sample{Phases: []phaseapi.Phase{p}, GPUErr: &gpu.StuckError{Since: t0, For: d, At: "gpu 1: GetPowerUsage"}}
	}
	now := t0
	for i, st := range []struct {
		after time.Duration
		s     Sample
		want  string
	}{
		{0, read, "gpu-lost firing began+0s 0000:2a:00"},
		{5 * time.Minute, read, ""},
		{5 * time.Second, stuck(3 * time.Second), ""},
		{55 * time.Second, stuck(58 * time.Second), ""},
		{5 * time.Second, stuck(63 * time.Second), "gpu-lost firing began+6m5s nvml"},
		{10 * time.Minute, stuck(11 * time.Minute), ""},
		{5 * time.Second, read, "gpu-lost resolved began+6m5s nvml"},
		{9 * time.Minute, read, ""},
		{time.Minute, read, `gpu-idle firing began+16m10s phase="A" A`},
	} {
		now = now.Add(st.after)
		var got []string
		for _, r := range rules {
			for _, a := range r.Observe(st.s, now) {
				got = append(got, describe(a)+" "+a.Incident)
				r.Pushed(a, true, now)
			}
		}
		if g := strings.Join(got, "; "); g != st.want {
			t.Fatalf("step %d at +%s: got %q, want %q", i, now.Sub(t0), g, st.want)
		}
	}
}

// TestFromNVMLNamesTheGPUTelemetryRules: FromNVML is true of every rule
// NewGPURules builds and of no other rule NewRules builds, so that what
// keys on it (--bark.level's gpu, the status page's "not watching")
// follows the rules as they are.
func TestFromNVMLNamesTheGPUTelemetryRules(t *testing.T) {
	gpuRules, err := NewGPURules(DefaultGPUConfig)
	if err != nil {
		t.Fatal(err)
	}
	fromNVML := map[RuleName]bool{}
	for _, r := range gpuRules {
		fromNVML[r.Name()] = true
		if !r.Name().FromNVML() {
			t.Errorf("%s reads NVML, but FromNVML says it does not", r.Name())
		}
	}
	all, err := NewRules(RuleFlags{Interval: 5 * time.Second, Threshold: 0.5, Hysteresis: 0.1, PressureThreshold: 0.2, OOM: true,
		GPU: true, GPUHangAfter: DefaultGPUHangAfter, GPUIdleAfter: DefaultGPUIdleAfter, GPUSlowdownAfter: DefaultGPUSlowdownAfter})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if r.Name().FromNVML() != fromNVML[r.Name()] {
			t.Errorf("%s: FromNVML %v, but NewGPURules builds it: %v", r.Name(), r.Name().FromNVML(), fromNVML[r.Name()])
		}
	}
	if len(fromNVML) != 6 {
		t.Errorf("NewGPURules built %d rules: %v", len(fromNVML), fromNVML)
	}
}
