package delivery

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/internal/barktest"
	"github.com/lavender-ml/lavender/internal/ntfytest"
)

// unnamedKeys are the storm keys of targets without a PHONE= setting, each
// its own key, with an identity of its own.
func unnamedKeys(keys ...string) stormKeys {
	ts := make([]stormTarget, len(keys))
	for i, k := range keys {
		ts[i] = stormTarget{key: k, id: "id of " + k}
	}
	return newStormKeys(ts)
}

// heldCase is a config that holds alerts, then is edited, and what each
// device gets once the held alerts are due.
type heldCase struct {
	name string
	// before and after are the target files, with {A}, {B} and {C} for the
	// templates of Bark devices A, B and C and {N} for an ntfy topic's URL;
	// after writes its files over before's, and removes those it maps to "".
	before, after map[string]string
	hold          map[string]int    // storm key → alerts it holds (one more is pushed first)
	want          map[string]string // device (A, B, C, N) → the counts its summaries say ("2"); none: no summary
	dropped       int               // held alerts dropped as their target is gone
}

// heldDevices are the Bark devices of heldCase, by device key.
var heldDevices = map[string]string{"KEY0000001": "A", "KEY0000002": "B", "KEY0000003": "C"}

// runHeldCase holds c.hold's alerts under storm control at one push a
// minute, edits the files as c.after says, lets change (a reload, or a
// restart after a crash) take the edit in, and checks the summaries that go
// out two minutes later, and what was logged as dropped.
func runHeldCase(t *testing.T, c heldCase, change func(*stateFixture)) {
	t.Helper()
	srv, nsrv := barktest.New(t, "KEY0000001", "KEY0000002", "KEY0000003"), ntfytest.New(t)
	templates := strings.NewReplacer("{A}", srv.Template("KEY0000001"), "{B}", srv.Template("KEY0000002"),
		"{C}", srv.Template("KEY0000003"), "{N}", nsrv.TopicURL(ntfytest.Topic))
	files := func(m map[string]string) map[string]string {
		out := make(map[string]string, len(m))
		for name, content := range m {
			out[name] = templates.Replace(content)
		}
		return out
	}
	clock := newTestClock()
	path := filepath.Join(t.TempDir(), "logs", StateFileName)
	f := &stateFixture{fixture: newFixture(t, files(c.before), func(cfg *Config) {
		cfg.Now, cfg.MaxPerMinute, cfg.StateFile, cfg.Prefix = clock.Now, 1, path, "[lavender-2]"
	}), srv: srv, clock: clock, path: path}
	t.Cleanup(func() { f.bridge.Close() })
	for key, n := range c.hold {
		for i := range n + 1 {
			p := NewPush("swap", fmt.Sprintf("[lavender-2] swap %d", i))
			p.Storm, p.Phone = []StormEvent{WordedEvent("swap", false)}, key
			f.bridge.Send(t.Context(), []*Push{p})
			want := ActionHeld
			if i == 0 {
				want = ActionPushed
			}
			if p.Action() != want {
				t.Fatalf("push %d to %s: %s, want %s", i, key, p.Action(), want)
			}
		}
	}
	edits := files(c.after)
	for name, content := range edits {
		if content == "" {
			if err := os.Remove(filepath.Join(f.dir, name)); err != nil {
				t.Fatal(err)
			}
			delete(edits, name)
		}
	}
	barktest.AddTargets(t, f.dir, edits)
	change(f)

	f.clock.Set(incidentStart.Add(2 * time.Minute))
	f.bridge.SendDue(t.Context(), f.clock.Now())
	got := map[string]string{}
	summary := regexp.MustCompile(`^\[lavender-2\] (\d+) more alerts? `)
	add := func(device, text string) {
		if m := summary.FindStringSubmatch(text); m != nil {
			got[device] = strings.TrimPrefix(got[device]+" "+m[1], " ")
		}
	}
	for _, p := range srv.Pushes() {
		add(heldDevices[p.DeviceKey], p.Body)
	}
	for _, p := range nsrv.Publishes() {
		add("N", p.Message)
	}
	if !maps.Equal(got, c.want) {
		t.Errorf("summaries by device %v, want %v\nlog:\n%s", got, c.want, f.logs.String())
	}
	dropped := 0
	if m := regexp.MustCompile(`level=WARN msg="\[bark\] [^"]*dropped[^"]*" alerts=(\d+)`).FindStringSubmatch(f.logs.String()); m != nil {
		dropped, _ = strconv.Atoi(m[1])
	}
	if dropped != c.dropped {
		t.Errorf("%d held alerts logged as dropped, want %d\nlog:\n%s", dropped, c.dropped, f.logs.String())
	}
}

// TestStormTrackTargetsJoinsKeysThatBecameOnePhone: two targets a reload
// names as one phone share its budget from then on: their held alerts go
// out in one summary, and their windows together keep the newest pushes
// that fit the limit.
func TestStormTrackTargetsJoinsKeysThatBecameOnePhone(t *testing.T) {
	l := mustStorm(t, 2)
	before := unnamedKeys("p:1", "p:2")
	l.trackTargets(stormKeys{}, before)
	for i, key := range []string{"p:1", "p:2"} {
		for j := range 3 + i {
			l.Allow(key, alerts(fmt.Sprintf("A%d", i)), stormAt(time.Duration(i*10+j)*time.Second))
		}
	}
	now := newStormKeys([]stormTarget{{"phone alice", "id of p:1", true}, {"phone alice", "id of p:2", true}})
	if dropped := l.trackTargets(before, now); dropped != 0 {
		t.Fatalf("%d held alerts dropped", dropped)
	}
	if len(l.targets) != 1 || l.targets["phone alice"] == nil {
		t.Fatalf("tracked %v, want phone alice alone", slices.Collect(maps.Keys(l.targets)))
	}
	if sent := l.targets["phone alice"].sent; len(sent) != 2 || !sent[0].Equal(stormAt(10*time.Second)) {
		t.Errorf("window %v, want the newest two pushes", sent)
	}
	// p:1 held 1 alert, p:2 held 2; the push at 10 s leaves the window at 70 s.
	sums := l.Due(stormAt(70 * time.Second))
	if len(sums) != 1 || sums[0].Target != "phone alice" || sums[0].Held != 3 {
		t.Fatalf("summaries %+v, want one of 3 alerts to phone alice", sums)
	}
}

// TestStormRequeueFollowsAReload: a summary that failed after a reload
// moved its target's line is held again under the line's key now; one
// whose target the reload removed is dropped, as is one taken before the
// reload before last, whose key may since name another target.
func TestStormRequeueFollowsAReload(t *testing.T) {
	for _, c := range []struct {
		name    string
		reloads []stormKeys
		want    string // the key that holds the summary's alerts again; "": dropped
	}{
		{"no reload", nil, "p:1"},
		{"its line moved", []stormKeys{newStormKeys([]stormTarget{{"p:2", "id of p:1", false}})}, "p:2"},
		{"its target removed", []stormKeys{unnamedKeys("q:1")}, ""},
		{"its line moved twice", []stormKeys{
			newStormKeys([]stormTarget{{"p:2", "id of p:1", false}}),
			newStormKeys([]stormTarget{{"p:3", "id of p:1", false}}),
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := mustStorm(t, 1)
			before := unnamedKeys("p:1")
			l.trackTargets(stormKeys{}, before)
			l.Allow("p:1", alerts("A"), stormAt(0))
			l.Allow("p:1", alerts("A"), stormAt(time.Second))
			sums := l.Due(stormAt(time.Minute))
			if len(sums) != 1 {
				t.Fatalf("summaries %+v", sums)
			}
			for _, now := range c.reloads {
				l.trackTargets(before, now)
				before = now
			}
			dropped := l.requeue(sums[0])
			held := map[string]int{}
			for key, st := range l.targets {
				if st.heldTotal > 0 {
					held[key] = st.heldTotal
				}
			}
			want, wantDropped := map[string]int{c.want: 1}, 0
			if c.want == "" {
				want, wantDropped = map[string]int{}, 1
			}
			if !maps.Equal(held, want) || dropped != wantDropped {
				t.Errorf("held %v, dropped %d; want held %v, dropped %d", held, dropped, want, wantDropped)
			}
		})
	}
}

// heldChanges are the two ways an edit of the target files is taken in:
// a reload, and a restart after a crash, where only the state file carries
// the held alerts over. Held alerts must come out of both the same.
var heldChanges = map[string]func(*stateFixture){"reload": reload, "restart": restart}

// TestHeldAlertsFollowTheirTarget: alerts storm control holds were
// answered 200, so an edit that moves their target to another key (its
// line renumbered, its phone named or renamed) or gives its phone another
// target (a device added in a file read first or in another channel, its
// template fixed) must carry them there, across a reload and a restart
// alike, and their summary goes out to the same device.
func TestHeldAlertsFollowTheirTarget(t *testing.T) {
	for _, c := range []heldCase{{
		name:   "a comment above its line",
		before: map[string]string{"phone.bark.env": "{A}\n"},
		hold:   map[string]int{"phone.bark.env:1": 2},
		after:  map[string]string{"phone.bark.env": "# my iPhone\n{A}\n"},
		want:   map[string]string{"A": "2"},
	}, {
		name:   "its line swapped with another",
		before: map[string]string{"phone.bark.env": "{A}\n{B}\n"},
		hold:   map[string]int{"phone.bark.env:1": 2, "phone.bark.env:2": 3},
		after:  map[string]string{"phone.bark.env": "{B}\n{A}\n"},
		want:   map[string]string{"A": "2", "B": "3"},
	}, {
		name:   "its line moved to another file",
		before: map[string]string{"phone.bark.env": "{A}\n"},
		hold:   map[string]int{"phone.bark.env:1": 2},
		after:  map[string]string{"phone.bark.env": "", "iphone.bark.env": "# moved\n{A}\n"},
		want:   map[string]string{"A": "2"},
	}, {
		name:   "now named by a PHONE= line",
		before: map[string]string{"phone.bark.env": "{A}\n"},
		hold:   map[string]int{"phone.bark.env:1": 2},
		after:  map[string]string{"phone.bark.env": "PHONE=alice\n{A}\n"},
		want:   map[string]string{"A": "2"},
	}, {
		name:   "two targets now named as one phone",
		before: map[string]string{"phone.bark.env": "{A}\n{B}\n"},
		hold:   map[string]int{"phone.bark.env:1": 2, "phone.bark.env:2": 3},
		after:  map[string]string{"phone.bark.env": "PHONE=alice\n{A}\n{B}\n"},
		want:   map[string]string{"A": "5", "B": "5"},
	}, {
		name:   "its phone renamed",
		before: map[string]string{"phone.bark.env": "PHONE=alice\n{A}\n"},
		hold:   map[string]int{"phone alice": 2},
		after:  map[string]string{"phone.bark.env": "PHONE=bob\n{A}\n"},
		want:   map[string]string{"A": "2"},
	}, {
		name:   "its phone renamed without its first target",
		before: map[string]string{"phone.bark.env": "PHONE=alice\n{A}\n{B}\n"},
		hold:   map[string]int{"phone alice": 2},
		after:  map[string]string{"phone.bark.env": "PHONE=bob\n{B}\n"},
		want:   map[string]string{"B": "2"},
	}, {
		name:   "its URL edited in place",
		before: map[string]string{"phone.bark.env": "{A}\n"},
		hold:   map[string]int{"phone.bark.env:1": 2},
		after:  map[string]string{"phone.bark.env": "{B}\n"},
		want:   map[string]string{"B": "2"},
	}, {
		name:   "its phone's only template edited",
		before: map[string]string{"phone.bark.env": "PHONE=alice\n{A}\n"},
		hold:   map[string]int{"phone alice": 2},
		after:  map[string]string{"phone.bark.env": "PHONE=alice\n{B}\n"},
		want:   map[string]string{"B": "2"},
	}, {
		name:   "a second device in a file read first",
		before: map[string]string{"phone.bark.env": "PHONE=alice\n{A}\n"},
		hold:   map[string]int{"phone alice": 2},
		after:  map[string]string{"ipad.bark.env": "PHONE=alice\n{B}\n"},
		want:   map[string]string{"A": "2", "B": "2"},
	}, {
		name:   "a Bark device beside its ntfy topic",
		before: map[string]string{"phone.ntfy.env": "{N} phone=alice\n"},
		hold:   map[string]int{"phone alice": 2},
		after:  map[string]string{"phone.bark.env": "PHONE=alice\n{A}\n"},
		want:   map[string]string{"A": "2", "N": "2"},
	}} {
		for how, change := range heldChanges {
			t.Run(c.name+"/"+how, func(t *testing.T) { runHeldCase(t, c, change) })
		}
	}
}

// TestHeldAlertsOfATargetGoneAreDropped: held alerts whose target or
// phone an edit removed have nowhere to go, and are dropped with a WARN,
// across a reload and a restart alike; never handed to another target
// that took over the line.
func TestHeldAlertsOfATargetGoneAreDropped(t *testing.T) {
	for _, c := range []heldCase{{
		name:    "its file removed",
		before:  map[string]string{"phone.bark.env": "{A}\n", "tablet.bark.env": "{B}\n"},
		hold:    map[string]int{"phone.bark.env:1": 2, "tablet.bark.env:1": 3},
		after:   map[string]string{"phone.bark.env": ""},
		want:    map[string]string{"B": "3"},
		dropped: 2,
	}, {
		name:    "its line removed, the next one moved up into it",
		before:  map[string]string{"phone.bark.env": "{A}\n{B}\n"},
		hold:    map[string]int{"phone.bark.env:1": 2, "phone.bark.env:2": 3},
		after:   map[string]string{"phone.bark.env": "{B}\n"},
		want:    map[string]string{"B": "3"},
		dropped: 2,
	}, {
		name:    "its phone removed",
		before:  map[string]string{"phone.bark.env": "PHONE=alice\n{A}\n", "tablet.bark.env": "{B}\n"},
		hold:    map[string]int{"phone alice": 2, "tablet.bark.env:1": 3},
		after:   map[string]string{"phone.bark.env": ""},
		want:    map[string]string{"B": "3"},
		dropped: 2,
	}} {
		for how, change := range heldChanges {
			t.Run(c.name+"/"+how, func(t *testing.T) { runHeldCase(t, c, change) })
		}
	}
}
