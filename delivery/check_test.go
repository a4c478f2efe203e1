package delivery

import (
	"errors"
	"testing"
	"time"
)

// TestConfigCheck: each field out of range is named with what it must be;
// New reads a zero timeout as the default, Check refuses it.
func TestConfigCheck(t *testing.T) {
	good := Config{Timeout: 5 * time.Second, MaxPerMinute: 10}
	if err := good.Check(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tc := range []struct {
		change  func(*Config)
		field   string
		problem string
	}{
		{func(c *Config) { c.Timeout = 0 }, "Timeout", "must be positive, not 0s"},
		{func(c *Config) { c.Timeout = -time.Second }, "Timeout", "must be positive, not -1s"},
		{func(c *Config) { c.DedupWindow = -time.Minute }, "DedupWindow", "must not be negative, not -1m0s"},
		{func(c *Config) { c.MaxPerMinute = -1 }, "MaxPerMinute", "must be in [0, 1000] (0 turns storm control off), not -1"},
		{func(c *Config) { c.MaxPerMinute = MaxMaxPerMinute + 1 }, "MaxPerMinute", "must be in [0, 1000] (0 turns storm control off), not 1001"},
		{func(c *Config) { c.ExternalURL = "gpu-3:9110" }, "ExternalURL", `must be an absolute http(s) URL such as https://gpu-3.example:9110/, not "gpu-3:9110"`},
		{func(c *Config) { c.ExternalURL = "ftp://gpu-3/" }, "ExternalURL", `must be an absolute http(s) URL such as https://gpu-3.example:9110/, not "ftp://gpu-3/"`},
	} {
		c := good
		tc.change(&c)
		var fe *FieldError
		if err := c.Check(); !errors.As(err, &fe) || fe.Field != tc.field || fe.Problem != tc.problem {
			t.Errorf("%s: Check() = %v, want field %s %q", tc.field, err, tc.field, tc.problem)
		}
	}
	withZeros := good
	withZeros.Timeout = 0
	if _, err := withZeros.withDefaults(); err != nil {
		t.Errorf("zero values are the defaults in New: %v", err)
	}
	withZeros.MaxPerMinute = -2
	if _, err := withZeros.withDefaults(); err == nil || err.Error() != "MaxPerMinute must be in [0, 1000] (0 turns storm control off), not -2" {
		t.Errorf("withDefaults of a bad limit: %v", err)
	}
}
