package barkbridge

import (
	"fmt"
	"strings"

	"lavender/internal/textsafe"
)

// maxSubjectBytes keeps the run-log line's "sent ok=N fail=M" visible
// under runlog's 80-byte cap however long an alert name is.
const maxSubjectBytes = 40

// subject is the short name of a push in the run log: one line, bounded.
func subject(s string) string {
	s = strings.Join(strings.Fields(textsafe.Sanitize(s)), " ")
	return textsafe.Truncate(s, maxSubjectBytes)
}

// runlogLine is the one builder of a push's run-log entry:
// "BARK swap 54% sent ok=1 fail=0".
func runlogLine(subj string, ok, failed int) string {
	return fmt.Sprintf("BARK %s sent ok=%d fail=%d", subj, ok, failed)
}
