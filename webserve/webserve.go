// Package webserve runs lavender's HTTP servers the way Prometheus's
// exporters do: listeners bound before anything else starts (or the
// sockets systemd passes), TLS and basic auth from an exporter-toolkit web
// config file, timeouts on every connection, a graceful shutdown within a
// grace period, /-/healthy and /-/ready, and the toolkit's landing page.
// It knows no handler of lavender's; the commands wire theirs in.
package webserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
)

// Listen says where to serve: the --web.* flags of exporter-toolkit.
type Listen struct {
	Addresses     []string // host:port each; ignored with SystemdSocket
	SystemdSocket bool     // take systemd's socket activation listeners instead
	ConfigFile    string   // exporter-toolkit web config (TLS, basic auth); "" for none
}

// Timeouts are an HTTP server's connection timeouts.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// DefaultTimeouts bound every connection so a slow or hostile client cannot
// hold the server; Write leaves room for a webhook that waits on Bark.
var DefaultTimeouts = Timeouts{ReadHeader: 5 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second, Idle: 120 * time.Second}

// Bind opens the listeners, or takes systemd's sockets, so that a port in
// use fails a command before it starts anything else. onListen, if set,
// learns the bound addresses (tests listen on 127.0.0.1:0).
func Bind(l Listen, onListen func([]net.Addr)) ([]net.Listener, error) {
	var listeners []net.Listener
	if l.SystemdSocket {
		ls, err := activation.Listeners()
		if err != nil {
			return nil, fmt.Errorf("systemd socket activation: %w", err)
		}
		for _, s := range ls {
			if s != nil {
				listeners = append(listeners, s)
			}
		}
		if len(listeners) == 0 {
			return nil, errors.New("systemd socket activation: no sockets passed")
		}
	} else {
		for _, addr := range l.Addresses {
			s, err := net.Listen("tcp", addr)
			if err != nil {
				CloseAll(listeners)
				return nil, fmt.Errorf("listen on %s: %w", addr, err)
			}
			listeners = append(listeners, s)
		}
		if len(listeners) == 0 {
			return nil, errors.New("no --web.listen-address given")
		}
	}
	if onListen != nil {
		addrs := make([]net.Addr, len(listeners))
		for i, s := range listeners {
			addrs[i] = s.Addr()
		}
		onListen(addrs)
	}
	return listeners, nil
}

// CloseAll closes listeners that will not be served.
func CloseAll(listeners []net.Listener) {
	for _, l := range listeners {
		l.Close()
	}
}

// Serve serves h on listeners until ctx ends, then shuts down, letting
// in-flight requests finish within grace. A web config file that does not
// validate is an error before anything is served.
func Serve(ctx context.Context, listeners []net.Listener, h http.Handler, l Listen, t Timeouts, grace time.Duration, logger *slog.Logger) error {
	if l.ConfigFile != "" {
		if err := web.Validate(l.ConfigFile); err != nil {
			CloseAll(listeners)
			return fmt.Errorf("web config %s: %w", l.ConfigFile, err)
		}
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	toolkit := &web.FlagConfig{WebListenAddresses: &l.Addresses, WebSystemdSocket: &l.SystemdSocket, WebConfigFile: &l.ConfigFile}
	errc := make(chan error, 1)
	go func() { errc <- web.ServeMultiple(listeners, srv, toolkit, logger) }()
	select {
	case err := <-errc:
		CloseAll(listeners)
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

// Readiness backs /-/ready: a command marks itself ready once its start-up
// work (the watchdog's first poll, say) is done.
type Readiness struct{ ready atomic.Bool }

// Set marks the command ready.
func (r *Readiness) Set() { r.ready.Store(true) }

// AddLifecycle registers the Prometheus-style /-/healthy and /-/ready.
func AddLifecycle(mux *http.ServeMux, r *Readiness) {
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

// AddLanding registers exporter-toolkit's landing page at "/", linking the
// given paths.
func AddLanding(mux *http.ServeMux, description string, links ...string) error {
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
