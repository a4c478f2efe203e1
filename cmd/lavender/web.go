package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"lavender/barkbridge"
	"lavender/exporter"
	"lavender/phaseapi"
	"lavender/webguard"
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
var jsonWritePaths = []string{barkbridge.WebhookPath, phaseapi.HeartbeatPath, phaseapi.RunsPath}

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

func (f *webFlags) toolkit() *web.FlagConfig {
	return &web.FlagConfig{
		WebListenAddresses: &f.ListenAddresses,
		WebSystemdSocket:   &f.SystemdSocket,
		WebConfigFile:      &f.ConfigFile,
	}
}

// Timeouts bound every connection so a slow or hostile client cannot hold
// the server; WriteTimeout leaves room for a webhook that waits on Bark.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
	shutdownGrace     = 10 * time.Second
)

// httpTimeouts are an HTTP server's connection timeouts.
type httpTimeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// servingTimeouts are every serving command's; tests shorten them to see
// them act.
var servingTimeouts = httpTimeouts{ReadHeader: readHeaderTimeout, Read: readTimeout, Write: writeTimeout, Idle: idleTimeout}

func newHTTPServer(h http.Handler, t httpTimeouts, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// bind opens the configured listeners, or takes systemd's sockets, before
// anything else starts, so a port in use fails the command early. onListen,
// if set, learns the bound addresses (tests listen on 127.0.0.1:0).
func (f *webFlags) bind(onListen func([]net.Addr)) ([]net.Listener, error) {
	var listeners []net.Listener
	if f.SystemdSocket {
		ls, err := activation.Listeners()
		if err != nil {
			return nil, fmt.Errorf("systemd socket activation: %w", err)
		}
		for _, l := range ls {
			if l != nil {
				listeners = append(listeners, l)
			}
		}
		if len(listeners) == 0 {
			return nil, errors.New("systemd socket activation: no sockets passed")
		}
	} else {
		for _, addr := range f.ListenAddresses {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				closeAll(listeners)
				return nil, fmt.Errorf("listen on %s: %w", addr, err)
			}
			listeners = append(listeners, l)
		}
		if len(listeners) == 0 {
			return nil, errors.New("no --web.listen-address given")
		}
	}
	if onListen != nil {
		addrs := make([]net.Addr, len(listeners))
		for i, l := range listeners {
			addrs[i] = l.Addr()
		}
		onListen(addrs)
	}
	return listeners, nil
}

func closeAll(listeners []net.Listener) {
	for _, l := range listeners {
		l.Close()
	}
}

// serveHTTP serves h on listeners until ctx ends, then shuts down, letting
// in-flight requests finish within grace. TLS and basic auth come from
// --web.config.file through exporter-toolkit.
func serveHTTP(ctx context.Context, listeners []net.Listener, h http.Handler, f *webFlags, timeouts httpTimeouts, grace time.Duration, logger *slog.Logger) error {
	if f.ConfigFile != "" {
		if err := web.Validate(f.ConfigFile); err != nil {
			closeAll(listeners)
			return fmt.Errorf("web config %s: %w", f.ConfigFile, err)
		}
	}
	srv := newHTTPServer(h, timeouts, logger)
	errc := make(chan error, 1)
	go func() { errc <- web.ServeMultiple(listeners, srv, f.toolkit(), logger) }()
	select {
	case err := <-errc:
		closeAll(listeners)
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

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
	ready       readiness
}

func newCommandServer(f *webFlags, externalURL string, logger *slog.Logger, onListen func([]net.Addr)) (*commandServer, error) {
	mux := http.NewServeMux()
	handler, err := f.guard(mux, externalURL, logger)
	if err != nil {
		return nil, err
	}
	listeners, err := f.bind(onListen)
	if err != nil {
		return nil, err
	}
	s := &commandServer{listeners: listeners, reg: newRegistry(), mux: mux, handler: handler}
	s.writeErrors = newWriteErrors(s.reg)
	s.mux.Handle("/metrics", metricsHandler(s.reg, logger))
	addLifecycle(s.mux, &s.ready)
	return s, nil
}

// close releases the listeners if serve was never reached.
func (s *commandServer) close() { closeAll(s.listeners) }

// serve marks the command ready and serves until ctx ends; see serveHTTP.
func (s *commandServer) serve(ctx context.Context, f *webFlags, grace time.Duration, logger *slog.Logger) error {
	return serveHTTP(ctx, s.listeners, s.handler, f, servingTimeouts, grace, logger)
}

// readiness backs /-/ready: a command marks itself ready once its start-up
// work (e.g. the watchdog's first poll) is done.
type readiness struct{ ready atomic.Bool }

func (r *readiness) set() { r.ready.Store(true) }

// addLifecycle registers the Prometheus-style health endpoints.
func addLifecycle(mux *http.ServeMux, r *readiness) {
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "lavender is Healthy.")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !r.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "lavender is not ready.")
			return
		}
		fmt.Fprintln(w, "lavender is Ready.")
	})
}

// addLanding registers exporter-toolkit's landing page at "/", linking the
// given paths.
func addLanding(mux *http.ServeMux, description string, links ...string) error {
	cfg := web.LandingConfig{
		Name:        "lavender",
		Description: description,
		Version:     version.Info(),
	}
	for _, l := range links {
		cfg.Links = append(cfg.Links, web.LandingLinks{Address: l, Text: strings.TrimPrefix(l, "/")})
	}
	page, err := web.NewLandingPage(cfg)
	if err != nil {
		return err
	}
	// The toolkit's page answers 404 for other paths itself but serves
	// any method at "/"; a write there is a mistake, so it gets 405.
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, fmt.Sprintf("method %s not allowed; use GET, HEAD", r.Method), http.StatusMethodNotAllowed)
			return
		}
		page.ServeHTTP(w, r)
	}))
	return nil
}
