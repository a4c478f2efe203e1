package app

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lavender-ml/lavender/exporter"
	"github.com/lavender-ml/lavender/phaseapi"
	"github.com/lavender-ml/lavender/webguard"
	"github.com/lavender-ml/lavender/webhook"
	"github.com/lavender-ml/lavender/webserve"
)

// jsonWritePaths are the endpoints whose bodies must be application/json:
// the webhook and the heartbeat API.
var jsonWritePaths = []string{webhook.WebhookPath, phaseapi.HeartbeatPath, phaseapi.RunsPath}

// ShutdownGrace bounds a serving command's graceful stop when nothing
// longer is needed.
const ShutdownGrace = 10 * time.Second

// ServingTimeouts are every serving command's; tests shorten them to see
// them act.
var ServingTimeouts = webserve.DefaultTimeouts

// guard wraps h with the write checks of package webguard.
func guard(h http.Handler, o WebOptions, logger *slog.Logger) (http.Handler, error) {
	allow, err := webguard.ParsePrefixes(o.WriteAllow)
	if err != nil {
		return nil, err
	}
	hosts, err := webguard.ParseAllowedHosts(o.AllowedHosts)
	if err != nil {
		return nil, err
	}
	return webguard.New(h, webguard.Config{
		WriteAllow:    allow,
		WebConfigFile: o.ConfigFile,
		JSONPaths:     jsonWritePaths,
		HostName:      Hostname(),
		AllowedHosts:  hosts,
		ExternalURL:   o.ExternalURL,
		Logger:        logger,
	})
}

func (o WebOptions) listen() webserve.Listen {
	return webserve.Listen{Addresses: o.ListenAddresses, SystemdSocket: o.SystemdSocket, ConfigFile: o.ConfigFile}
}

// selfGatherer gathers what every serving command exports besides its own
// metrics: the Go runtime, the process, and lavender_build_info. They
// describe lavender itself, so a scrape within a second of the last one
// replays them (see exporter.NewReplayingGatherer).
func selfGatherer() prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector("lavender"),
	)
	return exporter.NewReplayingGatherer(reg, time.Second)
}

// commandServer is what every serving command starts with: its listeners
// (bound first, so a port in use fails early), its registry, and a mux with
// /metrics, /-/healthy and /-/ready.
type commandServer struct {
	web       WebOptions
	listeners []net.Listener
	reg       *prometheus.Registry
	// writeErrors is the one lavender_runlog_write_errors_total; each
	// package that writes to the logs dir gets its series.
	writeErrors *prometheus.CounterVec
	mux         *http.ServeMux
	handler     http.Handler // mux behind the write guard
	ready       webserve.Readiness
}

func newCommandServer(o WebOptions, logger *slog.Logger, onListen func([]net.Addr)) (*commandServer, error) {
	mux := http.NewServeMux()
	handler, err := guard(mux, o, logger)
	if err != nil {
		return nil, err
	}
	listeners, err := webserve.Bind(o.listen(), onListen)
	if err != nil {
		return nil, err
	}
	s := &commandServer{web: o, listeners: listeners, reg: prometheus.NewRegistry(), mux: mux, handler: handler}
	s.writeErrors = newWriteErrors(s.reg)
	s.mux.Handle("/metrics", MetricsHandler(s.reg, logger))
	webserve.AddLifecycle(s.mux, &s.ready)
	return s, nil
}

// close releases the listeners if serve was never reached.
func (s *commandServer) close() { webserve.CloseAll(s.listeners) }

// serve serves until ctx ends, then stops within grace; see webserve.Serve.
func (s *commandServer) serve(ctx context.Context, grace time.Duration, logger *slog.Logger) error {
	return webserve.Serve(ctx, s.listeners, s.handler, s.web.listen(), ServingTimeouts, grace, logger)
}

// newWriteErrors is the one counter of failed writes to the logs dir.
// Each package that writes there gets its own series (writer="exporter",
// writer="bark"), made when the command wires that package, so a command
// exports only the writers it runs.
func newWriteErrors(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lavender_runlog_write_errors_total",
		Help: "Failed writes (and directory reads) of the logs dir: run-log entries and phase tables, by writer. The push or heartbeat itself went on.",
	}, []string{"writer"})
	reg.MustRegister(c)
	return c
}

// MetricsHandler serves reg, with the Go, process and build-info metrics
// (selfGatherer), the way node_exporter does: promhttp's own request
// metrics, registered in reg, and errors logged rather than failing the
// scrape.
func MetricsHandler(reg *prometheus.Registry, logger *slog.Logger) http.Handler {
	// Sent whole, in two write(2)s rather than a chunk per 4 KiB, and
	// gzipped there, at a fast level, rather than by promhttp.
	return exporter.WholeResponse(promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(exporter.MergeGatherers(reg, selfGatherer()), promhttp.HandlerOpts{
		ErrorLog:           slog.NewLogLogger(logger.Handler(), slog.LevelError),
		ErrorHandling:      promhttp.ContinueOnError,
		Registry:           reg,
		DisableCompression: true,
		// node_exporter's --web.max-requests default. A 503 is a failed
		// scrape (up == 0, LavenderDown), so the bound is set for a host
		// that stalls for a moment, not for a steady flood.
		MaxRequestsInFlight: 40,
	})))
}

// Hostname names this machine in the watchdog's pushes (their group and
// part of their id) and in the write guard; "" when the OS will not say.
func Hostname() string {
	h, _ := os.Hostname()
	return h
}
