package statuspage

import (
	"strings"
	"testing"
)

// A procfs that hides other users' processes is said on the page and in
// its JSON, with how it hides them; one that hides nothing is not.
func TestPageSaysProcfsHidesProcesses(t *testing.T) {
	for _, tc := range []struct {
		hides    bool
		why      string
		wantNote bool
		wantJSON string
	}{
		{true, "/proc is mounted with hidepid=invisible", true, `"procfs":{"hides_processes":true,"why":"/proc is mounted with hidepid=invisible"}`},
		{false, "", false, `"procfs":{"hides_processes":false}`},
	} {
		r := newRig(t, func(c *Config) {
			c.ProcVisibility = func() (bool, string) { return tc.hides, tc.why }
		})
		page := r.html()
		note := `<p class="error" id="procfs-hides">procfs hides other users' processes from lavender: /proc is mounted with hidepid=invisible — a phase whose process it cannot see is never reported as died, only as stalled</p>`
		if got := strings.Contains(page, `id="procfs-hides"`); got != tc.wantNote {
			t.Errorf("hides=%v: note shown %v, want %v", tc.hides, got, tc.wantNote)
		}
		if tc.wantNote && !strings.Contains(page, note) {
			t.Errorf("page lacks\n%s", note)
		}
		if _, _, js := r.get(StatusPath); !strings.Contains(js, tc.wantJSON) {
			t.Errorf("status JSON lacks %s:\n%s", tc.wantJSON, js)
		}
	}
}
