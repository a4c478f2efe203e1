package watchpush

import (
	"slices"
	"sync"
)

// maxShown bounds what shown remembers: far more open incidents than a
// host has, so forgetting them all at once only costs a resolution its
// replacing.
const maxShown = 4096

// shown remembers which notification (push id) shows which incidents, so
// that their resolutions replace that notification rather than add one: a
// poll that raised three stalled phases shows them in one notification,
// and when all three end, in one poll or not, that notification is the
// one to replace.
type shown struct {
	mu           sync.Mutex
	incidents    map[string][]string // notification → the incidents it shows
	notification map[string]string   // incident → the notification showing it last
}

// record notes that notification now shows incidents. An incident moved
// from another notification (a reminder pushed apart) leaves it, so that
// the last of those left there to end finds it whole and replaces it.
func (s *shown) record(notification string, incidents []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.incidents == nil || len(s.notification)+len(incidents) > maxShown {
		s.incidents, s.notification = map[string][]string{}, map[string]string{}
	}
	for _, id := range incidents {
		if old, ok := s.notification[id]; ok && old != notification {
			s.leave(old, id)
		}
	}
	s.incidents[notification] = slices.Clone(incidents)
	for _, id := range incidents {
		s.notification[id] = notification
	}
}

// leave drops incident from what notification shows, and the notification
// once it shows none. The caller holds mu.
func (s *shown) leave(notification, incident string) {
	rest := slices.DeleteFunc(s.incidents[notification], func(other string) bool { return other == incident })
	if len(rest) == 0 {
		delete(s.incidents, notification)
	} else {
		s.incidents[notification] = rest
	}
}

// forget drops a notification whose incidents have ended.
func (s *shown) forget(notification string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.incidents[notification] {
		if s.notification[id] == notification {
			delete(s.notification, id)
		}
	}
	delete(s.incidents, notification)
}

// ended drops incidents whose resolutions went out apart from the
// notification showing them, while it still showed others: the last of
// its incidents to end then finds it whole and replaces it, rather than
// leave it saying for ever that the ended ones still fire.
func (s *shown) ended(incidents []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range incidents {
		n, ok := s.notification[id]
		if !ok {
			continue
		}
		delete(s.notification, id)
		s.leave(n, id)
	}
}

// group is some resolutions of one poll, by index, and the notification
// they replace ("": their own).
type group struct {
	notification string
	members      []int
}

// split groups ending incidents by the notification showing them, where
// every incident that notification shows and that has not ended apart
// (ended) ends now; the others form one group with no notification.
// Groups come in the order of their first incident.
func (s *shown) split(ending []string) []group {
	s.mu.Lock()
	defer s.mu.Unlock()
	ends := map[string]bool{}
	for _, id := range ending {
		ends[id] = true
	}
	var groups []group
	at := map[string]int{} // notification → its group's index
	for i, id := range ending {
		n := s.notification[id]
		whole := n != ""
		for _, other := range s.incidents[n] {
			whole = whole && ends[other]
		}
		if !whole {
			n = ""
		}
		k, ok := at[n]
		if !ok {
			k = len(groups)
			at[n] = k
			groups = append(groups, group{notification: n})
		}
		groups[k].members = append(groups[k].members, i)
	}
	return groups
}
