package delivery

import (
	"strings"
	"testing"
)

func TestSubjectAndRunlogLine(t *testing.T) {
	if got := Subject(strings.Repeat("PhaseStalled", 10)); len(got) > MaxSubjectBytes {
		t.Errorf("subject is %d bytes", len(got))
	}
	line := "00:00:00 " + RunlogLine(Subject(strings.Repeat("Ж", 60)), 12, 345)
	if len(line) > 80 || !strings.HasSuffix(line, "sent ok=12 fail=345") {
		t.Errorf("run-log line %q (%d bytes) would be clipped", line, len(line))
	}
}
