package webhook

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/runlog"
)

func TestTmpPeak(t *testing.T) {
	debug.SetGCPercent(75)
	for _, held := range []bool{false, true} {
		var lines []string
		for i := range 5 {
			lines = append(lines, fmt.Sprintf("%s/KEY%d/$0", barktest.DownURL(t), i))
		}
		dir := barktest.ConfigDir(t, map[string]string{"phone.bark.env": strings.Join(lines, "\n")})
		logs := t.TempDir()
		cfg := delivery.Config{ConfigDir: dir, Runlog: runlog.Options{Dir: logs}, Timeout: 5 * time.Second}
		if held {
			cfg.MaxPerMinute, cfg.StateFile = 10, filepath.Join(logs, "bark-state.json")
		}
		br, _ := openHandler(t, fixtureConfig{Config: cfg}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		mux := http.NewServeMux()
		br.Register(mux)
		bodies := map[int][]byte{}
		for r := range 5 {
			var body bytes.Buffer
			body.WriteString(`{"version":"4","status":"firing","alerts":[`)
			for i := range 12000 {
				if i > 0 {
					body.WriteByte(',')
				}
				fmt.Fprintf(&body, `{"status":"firing","labels":{"alertname":"B"},"fingerprint":"%08x%08x"}`, r, i)
			}
			body.WriteString(`]}`)
			bodies[r] = body.Bytes()
		}
		post := func(round int) {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(bodies[round])))
		}
		post(0)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		stop := make(chan struct{})
		var max, maxAlloc uint64
		var prof bytes.Buffer
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				runtime.ReadMemStats(&ms)
				maxAlloc = maxU(maxAlloc, ms.HeapAlloc)
				if ms.HeapInuse > max {
					max = ms.HeapInuse
				}
			}
		}()
		var wg sync.WaitGroup
		for r := range 4 {
			wg.Go(func() { post(1 + r) })
		}
		wg.Wait()
		close(stop)
		<-done
		runtime.GC()
		pprof.Lookup("heap").WriteTo(&prof, 0)
		os.WriteFile(fmt.Sprintf("/tmp/peak-%v.prof", held), prof.Bytes(), 0o644)
		runtime.ReadMemStats(&ms)
		t.Logf("held=%v base inuse %d MB, peak inuse %d MB, peak alloc %d MB, after GC inuse %d MB", held, base>>20, max>>20, maxAlloc>>20, ms.HeapInuse>>20)
	}
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}
