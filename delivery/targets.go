package delivery

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/common/version"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/notify"
	"github.com/lavender-ml/lavender/ntfy"
)

// Loaded is what LoadTargets found in the config dir.
type Loaded struct {
	Notifiers []notify.Notifier // every good target: Bark's files, then ntfy's, each in name order
	Files     int               // target files read
	Bad       int               // lines refused
	Warnings  []string          // files readable by others, credentials sent in clear
	// Report is one line per target and per bad line, channel by channel,
	// as `check` prints them.
	Report []string
}

// LoadTargets reads every channel's target files in dir (*.bark.env,
// *.ntfy.env) and makes a notifier of each good target, sending with
// client (nil: each channel's shared one). err names each bad line as
// file:line; the good targets are loaded all the same. A dir that cannot
// be read is a *bark.ConfigDirError.
func LoadTargets(dir string, client *http.Client) (Loaded, error) {
	b, berr := bark.LoadTargets(dir)
	var dirErr *bark.ConfigDirError
	if errors.As(berr, &dirErr) {
		return Loaded{}, berr
	}
	n, nerr := ntfy.LoadTargets(dir)
	l := Loaded{
		Files:    len(b.Files) + len(n.Files),
		Bad:      len(b.Bad) + len(n.Bad),
		Warnings: append(b.Warnings, n.Warnings...),
		Report:   append(b.Report(), n.Report()...),
	}
	userAgent := "lavender/" + version.Version
	for _, t := range b.Targets {
		l.Notifiers = append(l.Notifiers, bark.New(t, client, userAgent))
	}
	for _, t := range n.Targets {
		l.Notifiers = append(l.Notifiers, ntfy.New(t, client, userAgent))
	}
	return l, errors.Join(berr, nerr)
}

// ConfigSuffixes are how the channels' target files' names end.
var ConfigSuffixes = []string{bark.ConfigSuffix, ntfy.ConfigSuffix}

// SendEach pushes to every notifier at once, each its own message, within
// timeout each (the retry stage's tries included), and returns the results
// in the notifiers' order: `send`'s one-off pushes, whose test text names
// each target's encryption.
func SendEach(ctx context.Context, ns []notify.Notifier, timeout time.Duration, message func(notify.Notifier) notify.Message) []Result {
	results := make([]Result, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			m := message(n)
			m.Text = Clip(m.Text) // as every push: the same words on every channel
			// The retry stage as in the pipeline, so a one-off push rides
			// out a 503 as the watchdog's and the webhook's do.
			if err := DefaultRetry.notify(ctx, n, m, func(time.Duration) {}, func(*notify.Error) {}); err != nil {
				results[i] = Result{Target: n.Name(), Err: err, Retryable: err.Retryable}
			} else {
				results[i] = Result{Target: n.Name()}
			}
		})
	}
	wg.Wait()
	return results
}

// Encryption is the end-to-end encryption of n's pushes ("aes-256-gcm"),
// or "" when its channel has none or it is off.
func Encryption(n notify.Notifier) string {
	if e, ok := n.(interface{ Encryption() string }); ok {
		return e.Encryption()
	}
	return ""
}
