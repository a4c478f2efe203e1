package delivery

import (
	"errors"
	"fmt"

	"github.com/lavender-ml/lavender/notify"
)

// Result is one target's outcome of a push.
type Result struct {
	Target    string // file:line
	Err       error  // nil on success; a *notify.Error whose text is a short class
	Retryable bool   // Err may pass on a later try
}

func (r Result) String() string {
	if r.Err == nil {
		return r.Target + " ok"
	}
	return fmt.Sprintf("%s failed: %s", r.Target, r.Err)
}

// Explain is String plus, for an answer that was not the service's, what
// came back instead: what `send --test` prints so a user can fix the target.
func (r Result) Explain() string {
	var pe *notify.Error
	if errors.As(r.Err, &pe) && pe.Saw != "" {
		return r.String() + " (saw " + pe.Saw + ")"
	}
	return r.String()
}
