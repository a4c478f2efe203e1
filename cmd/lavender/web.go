package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"lavender/exporter"
	"lavender/phaseapi"
	"lavender/webguard"
	"lavender/webhook"
	"lavender/webserve"
)

// webFlags are exporter-toolkit's flags, bound through kong.
type webFlags struct {
	ListenAddresses []string `name:"web.listen-address" default:"${listen_address}" sep:"none" help:"Address to listen on; repeat for several. Default port ${port}."`
	SystemdSocket   bool     `name:"web.systemd-socket" help:"Use systemd socket activation listeners instead of port listeners (Linux only)."`
	ConfigFile      string   `name:"web.config.file" default:"" help:"Path to an exporter-toolkit web config file that enables TLS and basic auth."`
	WriteAllow      []string `name:"web.write-allow" default:"${write_allow}" help:"Peers that may write (webhook, heartbeats, new runs, reload) without basic auth; repeat for several. 'host' is loopback and this host's own addresses, read at start. A request that passed the basic auth of --web.config.file may write from anywhere. Reads stay open to all."`
	AllowedHosts    []string `name:"web.allowed-host" placeholder:"NAME" help:"A name besides IP addresses, localhost, this host's name and --web.external-url's host under which writes without basic auth may reach lavender (the Host they send, e.g. a container or service name); repeat for several. Others get 403, so a web page whose name was rebound to this host cannot write."`
}

// jsonWritePaths are the endpoints whose bodies must be application/json:
// the bridge's webhook and the exporter's API.
var jsonWritePaths = []string{webhook.WebhookPath, phaseapi.HeartbeatPath, phaseapi.RunsPath}

// guard wraps h with the write checks of package webguard; externalURL is
// --web.external-url where the command has it.
func (f *webFlags) guard(h http.Handler, externalURL string, logger *slog.Logger) (http.Handler, error) {
	allow, err := webguard.ParsePrefixes(f.WriteAllow)
	if err != nil {
		return nil, err
	}
	hosts, err := webguard.ParseAllowedHosts(f.AllowedHosts)
	if err != nil {
		return nil, err
	}
	return webguard.New(h, webguard.Config{
		WriteAllow:    allow,
		WebConfigFile: f.ConfigFile,
		JSONPaths:     jsonWritePaths,
		HostName:      hostname(),
		AllowedHosts:  hosts,
		ExternalURL:   externalURL,
		Logger:        logger,
	})
}

// listen is where the flags say to serve.
func (f *webFlags) listen() webserve.Listen {
	return webserve.Listen{Addresses: f.ListenAddresses, SystemdSocket: f.SystemdSocket, ConfigFile: f.ConfigFile}
}

// shutdownGrace bounds a serving command's graceful stop when nothing
// longer is needed.
const shutdownGrace = 10 * time.Second

// servingTimeouts are every serving command's; tests shorten them to see
// them act.
var servingTimeouts = webserve.DefaultTimeouts

// newRegistry holds what every serving command exports besides its own
// metrics: the Go runtime, the process, and lavender_build_info.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	// The Go and process collectors describe lavender itself; they are
	// replayed for a second (see exporter.NewCachingCollector).
	reg.MustRegister(
		exporter.NewCachingCollector(collectors.NewGoCollector(), time.Second),
		exporter.NewCachingCollector(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), time.Second),
		versioncollector.NewCollector("lavender"),
	)
	return reg
}

// serveUntilSignal is the one start-up path of the serving commands
// (serve, exporter, bridge): the Go runtime settings, then serve until the
// first SIGINT or SIGTERM.
func serveUntilSignal(g *Globals, rt runtimeFlags, serve func(context.Context) error) error {
	if err := rt.apply(g.Logger); err != nil {
		return err
	}
	ctx, stop := shutdownContext(g)
	defer stop()
	return serve(ctx)
}

// shutdownContext ends at the first SIGINT or SIGTERM, so a serving command
// shuts down gracefully; a second signal exits at once.
func shutdownContext(g *Globals) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		g.Logger.Info("shutting down; a second signal exits at once", "signal", sig.String())
		cancel()
		if sig, ok = <-sigs; ok {
			g.Logger.Warn("second signal, exiting now", "signal", sig.String())
			os.Exit(1)
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(sigs)
		cancel()
	}
}

// commandServer is what every serving command starts with: its listeners
// (bound first, so a port in use fails early), its registry, and a mux with
// /metrics, /-/healthy and /-/ready.
type commandServer struct {
	listeners []net.Listener
	reg       *prometheus.Registry
	// writeErrors is the one lavender_runlog_write_errors_total; each
	// package that writes to the logs dir gets its series.
	writeErrors *prometheus.CounterVec
	mux         *http.ServeMux
	handler     http.Handler // mux behind the write guard
	ready       webserve.Readiness
}

func newCommandServer(f *webFlags, externalURL string, logger *slog.Logger, onListen func([]net.Addr)) (*commandServer, error) {
	mux := http.NewServeMux()
	handler, err := f.guard(mux, externalURL, logger)
	if err != nil {
		return nil, err
	}
	listeners, err := webserve.Bind(f.listen(), onListen)
	if err != nil {
		return nil, err
	}
	s := &commandServer{listeners: listeners, reg: newRegistry(), mux: mux, handler: handler}
	s.writeErrors = newWriteErrors(s.reg)
	s.mux.Handle("/metrics", metricsHandler(s.reg, logger))
	webserve.AddLifecycle(s.mux, &s.ready)
	return s, nil
}

// close releases the listeners if serve was never reached.
func (s *commandServer) close() { webserve.CloseAll(s.listeners) }

// serve serves until ctx ends, then stops within grace; see webserve.Serve.
func (s *commandServer) serve(ctx context.Context, f *webFlags, grace time.Duration, logger *slog.Logger) error {
	return webserve.Serve(ctx, s.listeners, s.handler, f.listen(), servingTimeouts, grace, logger)
}
