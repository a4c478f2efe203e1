// Package webguard decides who may write to lavender over HTTP. Reads
// (GET, HEAD, OPTIONS) pass untouched, so Prometheus scrapes from anywhere;
// every other method is a write (a webhook, a heartbeat, a new run, a
// reload) and must pass these checks, in this order:
//
//  1. It does not come from another web site: net/http's
//     CrossOriginProtection refuses (403) a request whose Sec-Fetch-Site
//     is anything but same-origin or none, or, from a browser too old to
//     send that header, whose Origin is not the server's own (or
//     --web.external-url's). Browsers send these headers and a page cannot
//     remove them; Alertmanager, curl, Python's urllib and `lavender
//     phase` send neither, so they are not affected.
//  2. It passed the basic auth of --web.config.file, which lets it write
//     from any peer under any Host; or
//  3. it comes from an allowed peer (--web.write-allow: by default
//     loopback and this host's own addresses; 403 otherwise, naming the
//     flag), and
//  4. it names lavender by a Host a web page cannot take over: an IP
//     literal, localhost, this host's name, --web.external-url's host or
//     a --web.allowed-host (403 otherwise, naming the flag). A page from
//     http://evil.example:9877 whose name its owner rebinds to 127.0.0.1
//     is same-origin to the browser and connects from loopback, so only
//     the Host it sends gives it away (DNS rebinding).
//  5. A JSON endpoint's body is declared as application/json (415
//     otherwise). An HTML form can only send text/plain, urlencoded or
//     multipart bodies without a CORS preflight, so this shuts the last
//     door a browser could use even if the others were open.
package webguard

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v2"
)

// WriteAllowFlag is the flag that allows peers to write; refusals name it.
const WriteAllowFlag = "--web.write-allow"

// HostPeers is the --web.write-allow value that stands for this host:
// loopback and the addresses of the host's own interfaces, read once at
// start. A program on the box that connects to the host's own address
// (Alertmanager posting to http://$(hostname):9877/webhook) arrives from
// that address, not from loopback.
const HostPeers = "host"

// DefaultWriteAllow is who may write without credentials: this host only.
var DefaultWriteAllow = []string{HostPeers}

// loopback is part of HostPeers whatever the interfaces say.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// interfaceAddrs lists the host's own addresses; tests replace it.
var interfaceAddrs = net.InterfaceAddrs

// Config says who may write and which paths take JSON.
type Config struct {
	// WriteAllow are the peers that may write without credentials.
	WriteAllow []netip.Prefix
	// WebConfigFile is exporter-toolkit's --web.config.file, or "". When
	// it has basic_auth_users, the toolkit has checked the password of any
	// request that reaches the guard, and such a request may write from
	// any peer. The file is read again on each such write, as the toolkit
	// reads it on every request.
	WebConfigFile string
	// JSONPaths are the paths whose writes must be application/json.
	JSONPaths []string
	// HostName is this host's name, which a write without credentials may
	// name in its Host header besides IP literals and localhost.
	HostName string
	// AllowedHosts are further names such a write may use
	// (--web.allowed-host).
	AllowedHosts []string
	// ExternalURL is --web.external-url, or "": its host is allowed as
	// a Host, and its origin as an Origin (a reverse proxy in front of
	// lavender may rewrite the Host a browser sent).
	ExternalURL string
	// Logger gets one debug line per refused write.
	Logger *slog.Logger
}

// ParsePrefixes reads --web.write-allow values: CIDRs, single addresses
// (a /32 or /128), or HostPeers for loopback and this host's own
// addresses.
func ParsePrefixes(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == HostPeers {
			own, err := hostPrefixes()
			if err != nil {
				return nil, err
			}
			out = append(out, own...)
			continue
		}
		if p, err := netip.ParsePrefix(v); err == nil {
			out = append(out, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(v); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		return nil, fmt.Errorf("%s %q: not an address, a CIDR or %q (e.g. 10.0.0.0/8 or ::1)", WriteAllowFlag, v, HostPeers)
	}
	return out, nil
}

// hostPrefixes are loopback and each of the host's interface addresses as
// a single-address prefix.
func hostPrefixes() ([]netip.Prefix, error) {
	addrs, err := interfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("%s=%s: list this host's addresses: %w", WriteAllowFlag, HostPeers, err)
	}
	out := slices.Clone(loopback)
	for _, a := range addrs {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			addr = addr.Unmap()
			out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
		}
	}
	return out, nil
}

type guard struct {
	next  http.Handler
	cfg   Config
	cross *http.CrossOriginProtection
	hosts hostNames
}

// New wraps next with the write checks. It fails only on an ExternalURL
// that is not an absolute http(s) URL.
func New(next http.Handler, cfg Config) (http.Handler, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &guard{next: next, cfg: cfg, cross: http.NewCrossOriginProtection(), hosts: newHostNames(cfg.HostName, cfg.AllowedHosts)}
	if cfg.ExternalURL != "" {
		u, err := url.Parse(cfg.ExternalURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("webguard: external URL %q is not an absolute http(s) URL", cfg.ExternalURL)
		}
		if err := g.cross.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			return nil, fmt.Errorf("webguard: external URL %q: %w", cfg.ExternalURL, err)
		}
		g.hosts.add(u.Hostname())
	}
	return g, nil
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		g.next.ServeHTTP(w, r)
		return
	}
	if err := g.cross.Check(r); err != nil {
		g.refuse(w, r, http.StatusForbidden, "cross-site write refused: "+crossSiteReason(r))
		return
	}
	if !g.authenticated(r) {
		if !g.peerAllowed(r) {
			g.refuse(w, r, http.StatusForbidden, fmt.Sprintf(
				"writes from %s are refused: only peers in %s (default: %s, meaning loopback and this host's own addresses) "+
					"may write without credentials; allow the peer with %s=CIDR, or give lavender a --web.config.file with basic_auth_users",
				peerHost(r), WriteAllowFlag, HostPeers, WriteAllowFlag))
			return
		}
		if !g.hosts.allows(r.Host) {
			g.refuse(w, r, http.StatusForbidden, g.hosts.refusal(r.Host))
			return
		}
	}
	if slices.Contains(g.cfg.JSONPaths, r.URL.Path) && !isJSON(r) {
		g.refuse(w, r, http.StatusUnsupportedMediaType, fmt.Sprintf(
			"Content-Type %q refused: send the body as Content-Type: application/json", r.Header.Get("Content-Type")))
		return
	}
	g.next.ServeHTTP(w, r)
}

// crossSiteReason says, for a request CrossOriginProtection refused, which
// header gave it away.
func crossSiteReason(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return "Sec-Fetch-Site: " + site
	}
	return fmt.Sprintf("Origin %q is not this server (%s)", r.Header.Get("Origin"), r.Host)
}

func peerHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (g *guard) peerAllowed(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		// A Unix socket (systemd socket activation with ListenStream=/path)
		// has no peer address: only processes on this host can reach it,
		// and the file's permissions say which.
		return r.RemoteAddr == "" || r.RemoteAddr == "@" || strings.HasPrefix(r.RemoteAddr, "/")
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap().WithZone("")
	for _, p := range g.cfg.WriteAllow {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// authenticated reports whether r passed the toolkit's basic auth: the web
// config has users and r names one of them. The toolkit refuses a wrong
// password before the guard sees the request.
func (g *guard) authenticated(r *http.Request) bool {
	user, _, ok := r.BasicAuth()
	if !ok || g.cfg.WebConfigFile == "" {
		return false
	}
	data, err := os.ReadFile(g.cfg.WebConfigFile)
	if err != nil {
		g.cfg.Logger.Warn("web config not readable; treating the write as unauthenticated", "err", err)
		return false
	}
	var c struct {
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		g.cfg.Logger.Warn("web config not parsed; treating the write as unauthenticated", "err", err)
		return false
	}
	_, known := c.Users[user]
	return known
}

func isJSON(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		// No body, nothing to declare: `curl -X POST …/api/v1/runs`.
		// A browser's cross-site request carries an Origin and is
		// refused above.
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

func (g *guard) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	g.cfg.Logger.Debug("write refused", "method", r.Method, "path", r.URL.Path, "peer", peerHost(r), "code", code, "reason", msg)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if strings.HasPrefix(r.URL.Path, "/api/") {
		// The API answers every error as {"error":"…"}.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}
