package delivery

import (
	"fmt"
	"io"
	"net/http"
)

// ReloadPath is where POST (or PUT) re-reads the targets, as Prometheus's
// and Alertmanager's /-/reload do.
const ReloadPath = "/-/reload"

// Register adds POST ReloadPath to mux.
func (b *Pipeline) Register(mux *http.ServeMux) {
	mux.HandleFunc(ReloadPath, b.serveReload)
}

func (b *Pipeline) serveReload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		w.Header().Set("Allow", "POST, PUT")
		http.Error(w, "only POST or PUT requests allowed", http.StatusMethodNotAllowed)
		return
	}
	// A reload takes no body; one is drained up to a bound so that the
	// connection can be reused, and anything larger is refused, as on every
	// other POST endpoint.
	if r.ContentLength > maxReloadBodyBytes {
		http.Error(w, fmt.Sprintf("body over the limit of %d bytes", maxReloadBodyBytes), http.StatusRequestEntityTooLarge)
		return
	}
	if n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, maxReloadBodyBytes+1)); n > maxReloadBodyBytes {
		http.Error(w, fmt.Sprintf("body over the limit of %d bytes", maxReloadBodyBytes), http.StatusRequestEntityTooLarge)
		return
	}
	if err := b.Reload(); err != nil {
		b.logger.Error("[bark] reload failed; keeping the targets in use", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if n := len(b.Targets()); n == 1 {
		fmt.Fprintln(w, "loaded 1 Bark target")
	} else {
		fmt.Fprintf(w, "loaded %d Bark targets\n", n)
	}
}

// maxReloadBodyBytes bounds what POST /-/reload reads of a body it ignores.
const maxReloadBodyBytes = 64 << 10
