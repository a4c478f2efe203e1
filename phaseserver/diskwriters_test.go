package phaseserver

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestDiskWriters: each phase with its directories, when it started,
// whether it ended, and its newest save with when it was reported; a phase
// that never saved has none.
func TestDiskWriters(t *testing.T) {
	env := newTestEnv(t)
	srv := env.server()
	for _, body := range []string{
		`{"phase":"Pretrain","event":"start","dirs":["/data/run","/ckpt"]}`,
		`{"phase":"Pretrain","event":"ping","save_bytes":1073741824}`,
		`{"phase":"Eval","event":"start","dirs":["/data/eval"]}`,
		`{"phase":"Eval","event":"end"}`,
	} {
		if code, _, msg := post(t, srv.URL, body); code != http.StatusOK {
			t.Fatalf("%s: %d %s", body, code, msg)
		}
		env.clock.Advance(time.Minute)
	}
	if code, _, msg := post(t, srv.URL, `{"phase":"Pretrain","event":"ping","save_bytes":2048}`); code != http.StatusOK {
		t.Fatalf("second save: %d %s", code, msg)
	}
	ws := env.e.DiskWriters()
	if len(ws) != 2 {
		t.Fatalf("writers %+v, want both phases", ws)
	}
	for _, w := range ws {
		switch w.Name {
		case "Pretrain":
			if !slices.Equal(w.Dirs, []string{"/data/run", "/ckpt"}) || w.SaveBytes != 2048 || !w.SavedAt.Equal(t0.Add(4*time.Minute)) ||
				w.Ended || !w.Started.Equal(t0) {
				t.Errorf("Pretrain: %+v, want its dirs, running since %s, and the newest save (2048 at %s)", w, t0, t0.Add(4*time.Minute))
			}
		case "Eval":
			if !slices.Equal(w.Dirs, []string{"/data/eval"}) || w.SaveBytes != 0 || !w.SavedAt.IsZero() || !w.Ended || !w.Started.Equal(t0.Add(2*time.Minute)) {
				t.Errorf("Eval: %+v, want its dir, ended, started at %s, and no save", w, t0.Add(2*time.Minute))
			}
		default:
			t.Errorf("unknown writer %+v", w)
		}
	}
}
