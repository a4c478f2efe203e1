package main

import (
	"context"

	"github.com/lavender-ml/lavender/app"
)

// webFlags are exporter-toolkit's flags, bound through kong.
type webFlags struct {
	ListenAddresses []string `name:"web.listen-address" default:"${listen_address}" sep:"none" help:"Address to listen on; repeat for several. Default port ${port}."`
	SystemdSocket   bool     `name:"web.systemd-socket" help:"Use systemd socket activation listeners instead of port listeners (Linux only)."`
	ConfigFile      string   `name:"web.config.file" default:"" help:"Path to an exporter-toolkit web config file that enables TLS and basic auth."`
	WriteAllow      []string `name:"web.write-allow" default:"${write_allow}" help:"Peers that may write (webhook, heartbeats, new runs, reload) without basic auth; repeat for several. 'host' is loopback and this host's own addresses, read at start. A request that passed the basic auth of --web.config.file may write from anywhere. Reads stay open to all."`
	AllowedHosts    []string `name:"web.allowed-host" placeholder:"NAME" help:"A name besides IP addresses, localhost, this host's name and --web.external-url's host under which writes without basic auth may reach lavender (the Host they send, e.g. a container or service name); repeat for several. Others get 403, so a web page whose name was rebound to this host cannot write."`
}

// webOptions are the web flags as app takes them; externalURL is
// --web.external-url where the command has it.
func (f *webFlags) webOptions(externalURL string) app.WebOptions {
	return app.WebOptions{
		ListenAddresses: f.ListenAddresses,
		SystemdSocket:   f.SystemdSocket,
		ConfigFile:      f.ConfigFile,
		WriteAllow:      f.WriteAllow,
		AllowedHosts:    f.AllowedHosts,
		ExternalURL:     externalURL,
	}
}

// serveUntilSignal is the one start-up path of the serving commands
// (serve, exporter, bridge): the Go runtime settings, then serve until the
// first SIGINT or SIGTERM.
func serveUntilSignal(g *Globals, rt runtimeFlags, serve func(context.Context) error) error {
	if err := rt.apply(g.Logger); err != nil {
		return err
	}
	return app.RunUntilSignal(g.Logger, serve)
}
