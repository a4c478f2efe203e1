package main

import (
	"net/http"

	"lavender/exporter"
	"lavender/statuspage"
	"lavender/watchdog"
)

// registerStatusPage serves the status page of exporter and serve on mux:
// cfg names what the command has beyond the exporter (the history, the
// bridge, the watchdog); the phases and the run log come from exp.
func registerStatusPage(mux *http.ServeMux, exp *exporter.Exporter, cfg statuspage.Config) error {
	cfg.Phases, cfg.RunLog = exp.Snapshot, exp.RunLog
	// Neither command has --phase.stall-after yet: the page marks stalls
	// after the stalled rule's default. serve passes its flag once it has
	// one.
	cfg.StallAfter = watchdog.DefaultStallAfter
	cfg.Links = []string{"/metrics", exporter.PhasesPath}
	page, err := statuspage.New(cfg)
	if err != nil {
		return err
	}
	page.Register(mux)
	return nil
}
