package delivery

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// incidentIDLen is the length of a Bark id in hex digits: 64 bits, so two
// incidents on one phone collide with a chance of about n²/2⁶⁵, and short
// enough for APNs' 64-byte collapse id, which bark-server fills from `id`.
// Hex survives a path, a query and a form without escaping.
const incidentIDLen = 16

// IncidentID is an incident's id (Bark's `id`, ntfy's sequence id) from
// what all of its pushes share. It hashes the parts with their lengths, so that no two different
// lists of parts (and no alert and watchdog incident) hash the same input.
func IncidentID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:incidentIDLen]
}
