package delivery

import (
	"fmt"
	"strings"

	"github.com/lavender-ml/lavender/internal/textsafe"
)

// MaxSubjectBytes keeps the run-log line's "sent ok=N fail=M" visible
// under runlog's 80-byte cap however long an alert name is.
const MaxSubjectBytes = 40

// Subject is the short name of a push in the run log: one line, bounded.
func Subject(s string) string {
	s = strings.Join(strings.Fields(textsafe.Sanitize(s)), " ")
	return textsafe.Truncate(s, MaxSubjectBytes)
}

// RunlogLine is the one builder of a push's run-log entry:
// "BARK swap 54% sent ok=1 fail=0".
func RunlogLine(subj string, ok, failed int) string {
	return fmt.Sprintf("BARK %s sent ok=%d fail=%d", subj, ok, failed)
}
