// Package lavender holds the one thing the whole repository shares: its
// version, read from the VERSION file beside go.mod, which the Python
// client's build reads too, so the binary and the client never disagree.
package lavender

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Version is the release this tree builds, such as "0.3.0".
func Version() string { return strings.TrimSpace(versionFile) }
