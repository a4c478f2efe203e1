package delivery

import (
	"fmt"
	"net/url"

	"github.com/lavender-ml/lavender/runlog"
)

// FieldError is a Config field whose value the pipeline cannot use (and,
// in the same shape, a field of webhook's Config or app's RuntimeOptions).
// Field is the field's name, so that a command can say which of its flags
// to fix.
type FieldError struct {
	Field   string // "Timeout"
	Problem string // "must be positive, not 0s"
}

func (e *FieldError) Error() string { return e.Field + " " + e.Problem }

// Check reports, as a *FieldError, the first field of c the pipeline cannot
// use, taking c as given: a zero Timeout is refused here,
// though New reads it as the default.
func (c Config) Check() error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Timeout <= 0:
		return bad("Timeout", "must be positive, not %s", c.Timeout)
	case c.DedupWindow < 0:
		return bad("DedupWindow", "must not be negative, not %s", c.DedupWindow)
	case c.MaxPerMinute < 0 || c.MaxPerMinute > MaxMaxPerMinute:
		return bad("MaxPerMinute", "must be in [0, %d] (0 turns storm control off), not %d", MaxMaxPerMinute, c.MaxPerMinute)
	}
	if c.ExternalURL != "" {
		u, err := url.Parse(c.ExternalURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("ExternalURL", "must be an absolute http(s) URL such as https://gpu-3.example:9110/, not %q", runlog.Truncate(c.ExternalURL, 100))
		}
	}
	return nil
}
