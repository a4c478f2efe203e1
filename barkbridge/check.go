package barkbridge

import (
	"fmt"
	"net/url"

	"lavender/runlog"
)

// FieldError is a Config field whose value the bridge cannot use. Field is
// the Config field's name, so that a command can say which of its flags
// to fix.
type FieldError struct {
	Field   string // "Threshold"
	Problem string // "must be in (0, 1], not 1.5"
}

func (e *FieldError) Error() string { return "barkbridge: " + e.Field + " " + e.Problem }

// Check reports, as a *FieldError, the first field of c the bridge cannot
// use, taking c as given: a zero Timeout or MaxBodyBytes is refused here,
// though New reads it as the default.
func (c Config) Check() error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Timeout <= 0:
		return bad("Timeout", "must be positive, not %s", c.Timeout)
	case !(c.Threshold >= 0 && c.Threshold <= 1):
		return bad("Threshold", "must be in [0, 1], not %g", c.Threshold)
	case c.DedupWindow < 0:
		return bad("DedupWindow", "must not be negative, not %s", c.DedupWindow)
	case c.MaxBodyBytes <= 0:
		return bad("MaxBodyBytes", "must be positive, not %d", c.MaxBodyBytes)
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
