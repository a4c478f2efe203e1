package pushtext

import (
	"strconv"

	"github.com/lavender-ml/lavender/watchdog"
)

// GPUIdle is `phase "Pretrain 1/3": GPUs 0–7 idle (at most 2% busy) for
// 10m with no new step — consider intervening`; for a phase that reports
// no steps "… for 10m (it reports no steps) — …". Its resolution reads
// `phase "Pretrain 1/3": GPUs 0–7 idle`. Subject "gpu-idle Pretrain 1/3".
func GPUIdle(f GPUPhaseFigures) Text {
	subject := string(watchdog.RuleGPUIdle) + " " + phaseName(f.Phase)
	head := "phase " + strconv.Quote(phaseName(f.Phase)) + ": " + gpus(f.GPUs) + " idle"
	if f.Over {
		return Text{Body: head, Subject: subject}
	}
	body := head + " (at most " + strconv.FormatUint(uint64(f.UtilPct), 10) + "% busy) for " + HumanDuration(f.Lasted) + f.noStep()
	return urging(body, subject)
}

func watchdogGPUIdle(a watchdog.Alert) Text { return GPUIdle(gpuPhaseFigures(a)) }
