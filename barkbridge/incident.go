package barkbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// incidentIDLen is the length of a Bark id in hex digits: 64 bits, so two
// incidents on one phone collide with a chance of about n²/2⁶⁵, and short
// enough for APNs' 64-byte collapse id, which bark-server fills from `id`.
// Hex survives a path, a query and a form without escaping.
const incidentIDLen = 16

// incidentID is the Bark `id` of an Alertmanager alert's incident. The
// fingerprint (a hash of the label set) and startsAt are what every copy of
// one incident shares: HA peers, retries, reminders and the resolved
// notification, so a later push replaces the earlier notification. A new
// incident of the same alert starts later, so it gets a new id. startsAt
// counts as an instant, so the time zone it was written in does not matter.
func incidentID(fingerprint string, startsAt time.Time) string {
	return hashID("alertmanager", fingerprint, strconv.FormatInt(startsAt.UnixNano(), 10))
}

// watchdogIncidentID is the Bark `id` of a watchdog incident: one rule on
// one host, from the time the rule began to fire until it re-arms. began
// must be the time stored when the incident began, not the time of the
// current poll. The host keeps two hosts' watchdogs apart on one phone.
func watchdogIncidentID(rule string, began time.Time, host string) string {
	return hashID("watchdog", rule, host, strconv.FormatInt(began.UnixNano(), 10))
}

// hashID hashes the parts with their lengths, so that no two different
// lists of parts (and no alert and watchdog incident) hash the same input.
func hashID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:incidentIDLen]
}
