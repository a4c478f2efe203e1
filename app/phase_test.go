package app

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/lavender-ml/lavender/heartbeat"
)

func TestPhaseRunUsageErrors(t *testing.T) {
	// What `lavender phase run Train -- true` gives, but for the one value
	// each case breaks.
	base := func() PhaseRunOptions {
		return PhaseRunOptions{
			Client:  heartbeat.ClientConfig{URL: heartbeat.DefaultURL, Timeout: heartbeat.DefaultTimeout},
			Phase:   "Train",
			Every:   heartbeat.DefaultPingInterval,
			Command: []string{"--", "true"},
		}
	}
	for name, change := range map[string]func(*PhaseRunOptions){
		"--every 0s":                 func(o *PhaseRunOptions) { o.Every = 0 },
		"--url ftp://127.0.0.1:9877": func(o *PhaseRunOptions) { o.Client.URL = "ftp://127.0.0.1:9877" },
		"a name with a tab":          func(o *PhaseRunOptions) { o.Phase = "bad\tname" },
		"no command after --":        func(o *PhaseRunOptions) { o.Command = []string{"--"} },
	} {
		o := base()
		change(&o)
		var stdout bytes.Buffer
		code, err := RunPhase(t.Context(), o, Env{Logger: slog.New(slog.DiscardHandler)}, nil, &stdout, io.Discard, nil)
		if err == nil || code == 0 {
			t.Errorf("%s: run = %d, %v; want a usage error", name, code, err)
		}
	}
}
