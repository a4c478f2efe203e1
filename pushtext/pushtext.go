// Package pushtext is the one home of lavender's push texts: every kind of
// event (swap, memory pressure, OOM kills, a phase that failed, stalled or
// is done, …) is worded in one place, from the watchdog's facts or from
// the same figures read off an Alertmanager alert, apart from delivery.
// The Bark bridge pushes these texts; another channel could reuse them.
//
// A Text is a push's body and its short name in the run log:
// "swap 54% full (16.3/32.0 GB) — consider intervening" and "swap 54%".
// The bridge adds the prefix ("[lavender-2] ") and the client cuts the
// whole to its limit.
//
// To add a kind: write its figures, its Text function and the function
// that reads them off the watchdog's alert in a file of its own
// (pushtext/gpu.go beside swap.go), add one line for its rule to wordings
// (rules.go), and pin its wording in a table of tests. An Alertmanager
// alert of the same kind reads its figures from annotations in webhook
// and calls the same function.
package pushtext

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/internal/textsafe"
	"github.com/lavender-ml/lavender/watchdog"
)

// DefaultPrefix starts every push, as in the predecessor.
const DefaultPrefix = "[lavender-2]"

// considerIntervening ends the texts that ask a person to act before the
// kernel does; a resolution drops it.
const considerIntervening = " — consider intervening"

// Text is one push's wording: Body is what the phone shows (without the
// prefix), Subject names the push in the run log ("BARK swap 54% sent …").
type Text struct {
	Body    string
	Subject string
	// urges: Body ends in " — consider intervening", which a resolution
	// drops.
	urges bool
}

// urging is t asking a person to act.
func urging(body, subject string) Text {
	return Text{Body: body + considerIntervening, Subject: subject, urges: true}
}

// Alert is the text of one watchdog alert, by its rule's line in
// wordings (rules.go). A resolution says how long its incident lasted:
// "resolved: swap 31% full (9.9/32.0 GB) after 42m". A rule with no text
// of its own still reaches the phone, by name.
func Alert(a watchdog.Alert) Text {
	t := firing(a)
	if a.Status == watchdog.Resolved {
		return Resolved(t, a.Lasted())
	}
	return t
}

func firing(a watchdog.Alert) Text {
	if w, ok := wordingOf(a.Rule); ok {
		return w.text(a)
	}
	return Text{Body: string(a.Rule) + " " + string(a.Status), Subject: string(a.Rule)}
}

// Join is the text of several alerts in one push, in the order given (the
// watchdog's: swap, pressure, oom, phases): bodies joined by "; ", subjects
// by " + ", e.g. "BARK pressure 23% + oom 1 kill sent ok=1 fail=0".
//
// A list longer than maxBody bytes (0: no limit) is never cut mid-list:
// it keeps the texts that fit whole and says how many it leaves out,
// `phase "a" stalled …; phase "b" stalled …; and 29 more`; the subject
// likewise within maxSubject: "stalled a + 30 more". The first text always
// shows, cut with "…" only if it alone does not fit.
func Join(ts []Text, maxBody, maxSubject int) Text {
	bodies := make([]string, len(ts))
	subjects := make([]string, len(ts))
	for i, t := range ts {
		bodies[i], subjects[i] = t.Body, t.Subject
	}
	return Text{
		Body:    joinWithin(bodies, "; ", "; and %d more", maxBody),
		Subject: joinWithin(subjects, " + ", " + %d more", maxSubject),
	}
}

// joinWithin joins items with sep within max bytes (0: no limit), ending
// with more (a format of the number left out) when some do not fit.
func joinWithin(items []string, sep, more string, max int) string {
	whole := strings.Join(items, sep)
	if max <= 0 || len(whole) <= max || len(items) < 2 {
		return whole // one text alone is the client's to cut
	}
	var b strings.Builder
	kept := 0
	for i, item := range items {
		n := b.Len() + len(item)
		if i > 0 {
			n += len(sep)
		}
		if left := len(items) - i - 1; left > 0 {
			n += len(fmt.Sprintf(more, left))
		}
		if n > max {
			break
		}
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(item)
		kept++
	}
	if kept == 0 {
		b.WriteString(textsafe.Truncate(items[0], max-len(fmt.Sprintf(more, len(items)-1))))
		kept = 1
	}
	if left := len(items) - kept; left > 0 {
		fmt.Fprintf(&b, more, left)
	}
	return b.String()
}

// Resolved is t once its incident is over, after lasted (0: unknown, and
// the "after" is left out): "resolved: swap 31% full (9.9/32.0 GB) after
// 42m", subject "resolved swap 31%".
func Resolved(t Text, lasted time.Duration) Text {
	body := t.Body
	if t.urges {
		body = strings.TrimSuffix(body, considerIntervening)
	}
	body = "resolved: " + body
	if lasted > 0 {
		body += " after " + HumanDuration(lasted)
	}
	return Text{Body: body, Subject: "resolved " + t.Subject}
}

// Named is the text of an alert lavender has no wording for: its name,
// and its summary after a colon when it has one.
func Named(name, summary string) Text {
	if summary != "" {
		return Text{Body: name + ": " + summary, Subject: name}
	}
	return Text{Body: name, Subject: name}
}

// SelfTest is `bark send --test`'s text. It names the target's encryption
// ("aes-256-gcm", or "" for none), so that a user who sees "Decryption
// Failed" knows the key is wrong, and goes on with a sample of real texts
// longer than any push may be, so that the client cuts it to the longest
// push there is: a test that passes on a short text alone would prove
// nothing of a long push (a ciphertext of many blocks, a full request).
func SelfTest(encryption string) Text {
	if encryption == "" {
		encryption = "not encrypted"
	}
	const gib = 1 << 30
	swap := SwapFigures{Ratio: 0.54, UsedBytes: 17501991731, TotalBytes: 32 * gib}
	sample := []Text{
		Swap(swap),
		Pressure(PressureFigures{Ratio: 0.23, Window: 10 * time.Second, Swap: swap, SwapKnown: true}),
		OOM(OOMFigures{Kills: 3, VictimName: "python3", VictimPID: 4242, Phase: "Pretrain 1/3", Swap: swap, SwapKnown: true}),
	}
	for i := range 8 {
		sample = append(sample, Phase(PhaseFigures{Event: watchdog.RuleStalled, Phase: "Finetune shard " + strconv.Itoa(i+1), Duration: 10 * time.Minute, Stall: watchdog.StallStep, Step: 1200, Total: 5000}))
	}
	return Text{Body: "test push (" + encryption + ") at the longest a push can be: " + Join(sample, 0, 0).Body, Subject: "test push"}
}

// WithPrefix starts text with prefix and a space; an empty prefix adds
// nothing.
func WithPrefix(prefix, text string) string {
	if prefix == "" {
		return text
	}
	return prefix + " " + text
}

// SelfTestTags are the tags of a test push: ntfy shows them as 🧪.
var SelfTestTags = []string{"test_tube"}
