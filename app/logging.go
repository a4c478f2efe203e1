package app

import (
	"io"
	"log"
	"log/slog"

	"github.com/prometheus/common/promslog"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/notify"
	"github.com/lavender-ml/lavender/ntfy"
)

// NewLogger is every command's logger: promslog's, at level ("debug",
// "info", "warn", "error") in format ("logfmt", "json"), writing to w.
// Every line is scrubbed of every channel's secrets (Bark device keys,
// APNs tokens, ntfy tokens and passwords), whatever wrote it.
func NewLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	lvl := promslog.NewLevel()
	if err := lvl.Set(level); err != nil {
		return nil, err
	}
	fmtr := promslog.NewFormat()
	if err := fmtr.Set(format); err != nil {
		return nil, err
	}
	scrub := func(s string) string { return ntfy.Scrub(bark.Scrub(s)) }
	return slog.New(notify.NewScrubHandler(promslog.New(&promslog.Config{Level: lvl, Format: fmtr, Writer: w}).Handler(), scrub)), nil
}

// RouteStdLog sends the standard log package, where net/http speaks (e.g.
// "Unsolicited response received on idle HTTP channel", quoting what a
// server sent, key included), through logger and its scrubbing, until
// restore is called.
func RouteStdLog(logger *slog.Logger) (restore func()) {
	w, flags, prefix := log.Writer(), log.Flags(), log.Prefix()
	log.SetOutput(slog.NewLogLogger(logger.Handler(), slog.LevelWarn).Writer())
	log.SetFlags(0)
	log.SetPrefix("")
	return func() {
		log.SetOutput(w)
		log.SetFlags(flags)
		log.SetPrefix(prefix)
	}
}
