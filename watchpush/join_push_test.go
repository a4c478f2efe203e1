package watchpush

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/bark"
	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/watchdog"
)

// TestWatchdogPushOfManyPhasesSaysHowManyMore: a poll that finds 31
// stalled phases pushes one text that names as many as fit whole and says
// how many more there are, instead of being cut mid-list at 512 bytes
// with some phases never named.
func TestWatchdogPushOfManyPhasesSaysHowManyMore(t *testing.T) {
	srv := barktest.New(t)
	f := newFixture(t, map[string]string{"phone.bark.env": srv.Template(barktest.Key)}, nil)
	var poll []watchdog.Alert
	for i := range 31 {
		poll = append(poll, silentPhaseAlert(fmt.Sprintf("Finetune shard %02d", i), 20*time.Minute))
	}
	if ok, failed := f.pusher.Push(t.Context(), poll); ok != 1 || failed != 0 {
		t.Fatalf("Push = %d, %d", ok, failed)
	}
	got := srv.Pushes()
	if len(got) != 1 {
		t.Fatalf("%d pushes, want 1", len(got))
	}
	body := got[0].Body
	m := regexp.MustCompile(`; and (\d+) more$`).FindStringSubmatch(body)
	if m == nil || strings.Contains(body, "…") || len(body) > bark.MaxMessageBytes {
		t.Fatalf("push of %d bytes does not end in \"; and N more\", or is cut:\n%s", len(body), body)
	}
	more, _ := strconv.Atoi(m[1])
	named := regexp.MustCompile(`"Finetune shard \d\d"`).FindAllString(body, -1)
	if len(named)+more != 31 || len(named) < 2 {
		t.Errorf("%d phases named and %d more, want 31 in all:\n%s", len(named), more, body)
	}
	for i, n := range named {
		if want := fmt.Sprintf(`"Finetune shard %02d"`, i); n != want {
			t.Errorf("phase %d named %s, want %s, in the watchdog's order", i, n, want)
		}
	}
	if lines := f.barkLines(); len(lines) != 1 || !regexp.MustCompile(`^BARK stalled Finetune shard 00 \+ \d+ more sent ok=1 fail=0$`).MatchString(lines[0]) {
		t.Errorf("run log %q, want the subject to say how many more too", lines)
	}
}
