package app

import (
	"net/http"

	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/phaseserver"
	"github.com/lavender-ml/lavender/statuspage"
)

// registerStatusPage serves the status page of exporter and serve on mux:
// cfg names what the command has beyond the exporter (the history, the
// bridge, the watchdog, when a phase counts as stalled); the phases and the
// run log come from exp.
func registerStatusPage(mux *http.ServeMux, exp *phaseserver.Server, cfg statuspage.Config) error {
	cfg.Phases, cfg.RunLog, cfg.ProcVisibility = exp.Snapshot, exp.RunLog, exp.ProcVisibility
	cfg.Links = []string{"/metrics", phaseapi.PhasesPath}
	page, err := statuspage.New(cfg)
	if err != nil {
		return err
	}
	page.Register(mux)
	return nil
}
