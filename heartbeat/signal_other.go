//go:build !unix

package heartbeat

import "strconv"

// signalName names a signal by number where the platform has no names.
func signalName(n int) string { return "signal " + strconv.Itoa(n) }
