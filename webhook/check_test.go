package webhook

import (
	"errors"
	"testing"
	"time"

	"github.com/lavender-ml/lavender/delivery"
)

// TestConfigCheck: each field out of range is named with what it must be;
// New reads a zero timeout or body limit as the default, Check refuses it.
func TestConfigCheck(t *testing.T) {
	good := Config{Timeout: 5 * time.Second, Threshold: 0.5, MaxBodyBytes: 1 << 20}
	if err := good.Check(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tc := range []struct {
		change  func(*Config)
		field   string
		problem string
	}{
		{func(c *Config) { c.Timeout = 0 }, "Timeout", "must be positive, not 0s"},
		{func(c *Config) { c.Threshold = -0.1 }, "Threshold", "must be in [0, 1], not -0.1"},
		{func(c *Config) { c.Threshold = 1.5 }, "Threshold", "must be in [0, 1], not 1.5"},
		{func(c *Config) { c.MaxBodyBytes = 0 }, "MaxBodyBytes", "must be positive, not 0"},
	} {
		c := good
		tc.change(&c)
		var fe *delivery.FieldError
		if err := c.Check(); !errors.As(err, &fe) || fe.Field != tc.field || fe.Problem != tc.problem {
			t.Errorf("%s: Check() = %v, want field %s %q", tc.field, err, tc.field, tc.problem)
		}
	}
	withZeros := good
	withZeros.Timeout, withZeros.MaxBodyBytes, withZeros.Threshold = 0, 0, 0
	if _, err := withZeros.withDefaults(); err != nil {
		t.Errorf("zero values are the defaults in New: %v", err)
	}
	withZeros.Threshold = 2
	if _, err := withZeros.withDefaults(); err == nil || err.Error() != "Threshold must be in [0, 1], not 2" {
		t.Errorf("withDefaults of a bad threshold: %v", err)
	}
}
