package webguard

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// AllowedHostFlag is the flag that allows more names in the Host header of
// writes without credentials; refusals name it.
const AllowedHostFlag = "--web.allowed-host"

// hostNames are the names, besides IP literals and localhost, that a write
// without credentials may give as its Host.
type hostNames struct {
	own   string   // this host's name, as given
	names []string // normalised: lower case, no trailing dot
}

func newHostNames(own string, allowed []string) hostNames {
	h := hostNames{own: own}
	h.add(own)
	for _, a := range allowed {
		h.add(a)
	}
	return h
}

func (h *hostNames) add(name string) {
	if n := normaliseHost(name); n != "" && !slices.Contains(h.names, n) {
		h.names = append(h.names, n)
	}
}

// allows reports whether a Host header value names lavender in a way no web
// page can take over. An IP literal cannot be rebound; localhost resolves
// to loopback in every browser; the host's own name and the configured
// names are the operator's. No Host at all (HTTP/1.0) comes from no
// browser, so there is no page to have rebound it.
func (h hostNames) allows(hostHeader string) bool {
	name := hostOnly(hostHeader)
	if name == "" {
		return true
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	name = normaliseHost(name)
	return name == "localhost" || slices.Contains(h.names, name)
}

func (h hostNames) refusal(hostHeader string) string {
	own := ""
	if h.own != "" {
		own = fmt.Sprintf(", this host's name (%s)", h.own)
	}
	return fmt.Sprintf("writes to Host %q are refused: without credentials a write must name lavender by an IP address, localhost%s "+
		"or --web.external-url's host, so that a web page whose name was rebound to this host cannot write; "+
		"allow the name with %s=%s, or give lavender a --web.config.file with basic_auth_users",
		hostHeader, own, AllowedHostFlag, normaliseHost(hostOnly(hostHeader)))
}

// hostOnly strips the port and an IPv6 literal's brackets from a Host.
func hostOnly(hostHeader string) string {
	if host, _, err := net.SplitHostPort(hostHeader); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostHeader, "["), "]")
}

func normaliseHost(name string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
}

// ParseAllowedHosts checks --web.allowed-host values: host names without
// a scheme, port or path.
func ParseAllowedHosts(values []string) ([]string, error) {
	out := make([]string, 0, len(values))
	for _, v := range values {
		n := normaliseHost(v)
		if n == "" || strings.ContainsAny(n, ":/@ []") {
			return nil, fmt.Errorf("%s %q: not a host name (e.g. lavender or gpu-3.example, without scheme or port)", AllowedHostFlag, v)
		}
		out = append(out, n)
	}
	return out, nil
}
