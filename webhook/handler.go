// Package webhook is Alertmanager's webhook receiver: it decodes a
// notification's alerts, words each with pushtext as serve's watchdog words
// the same event, and hands the pushes to delivery, which dedups, limits,
// fans out and records them. Its answer is what Alertmanager's retry reads:
// 503 when a failure may pass, else 200.
package webhook

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lavender-ml/lavender/delivery"
	"github.com/lavender-ml/lavender/pushtext"
)

// Defaults for the zero values of Config.
const (
	DefaultThreshold     = 0.0 // none: alerts.yml's SwapUsageHigh decides
	DefaultSwapAlertname = "SwapUsageHigh"
	DefaultMaxBodyBytes  = 1 << 20
)

// Config configures a Handler. Zero values take the defaults above.
type Config struct {
	// Timeout bounds a webhook's answer; default delivery.DefaultTimeout.
	Timeout       time.Duration
	Prefix        string  // starts every message; default pushtext.DefaultPrefix
	Threshold     float64 // swap ratio [0–1] under which a firing swap alert is not pushed; 0: none, the alert rule decides
	SwapAlertname string  // the swap alert's name
	OnlySwap      bool    // push no alert but the swap alert
	SendResolved  bool    // push resolved alerts too
	MaxBodyBytes  int64   // largest webhook body accepted; default 1 MiB
}

func (c Config) withDefaults() (Config, error) {
	if c.Timeout == 0 {
		c.Timeout = delivery.DefaultTimeout
	}
	if c.Prefix == "" {
		c.Prefix = pushtext.DefaultPrefix
	}
	if c.SwapAlertname == "" {
		c.SwapAlertname = DefaultSwapAlertname
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return c, c.Check()
}

// Check reports, as a *delivery.FieldError, the first field of c the
// handler cannot use, taking c as given.
func (c Config) Check() error {
	bad := func(field, format string, args ...any) error {
		return &delivery.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Timeout <= 0:
		return bad("Timeout", "must be positive, not %s", c.Timeout)
	case !(c.Threshold >= 0 && c.Threshold <= 1):
		return bad("Threshold", "must be in [0, 1], not %g", c.Threshold)
	case c.MaxBodyBytes <= 0:
		return bad("MaxBodyBytes", "must be positive, not %d", c.MaxBodyBytes)
	}
	return nil
}

// Handler serves the webhook. It is safe for concurrent use.
type Handler struct {
	cfg      Config
	delivery *delivery.Pipeline
	logger   *slog.Logger
	metrics  *metrics
}

// New returns the handler that hands its pushes to d, and registers its
// metrics with reg (nil: none).
func New(cfg Config, d *delivery.Pipeline, logger *slog.Logger, reg prometheus.Registerer) (*Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("webhook: register metrics: %w", err)
	}
	return &Handler{cfg: cfg, delivery: d, logger: logger, metrics: m}, nil
}

type metrics struct {
	requests *prometheus.CounterVec // code
	alerts   *prometheus.CounterVec // status, action
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lavender_webhook_requests_total",
			Help: "Alertmanager webhook requests by HTTP status code answered.",
		}, []string{"code"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lavender_webhook_alerts_total",
			Help: "Alerts received on the webhook by status (firing, resolved, unknown) and action (pushed, failed, skipped, duplicate, held).",
		}, []string{"status", "action"}),
	}
	for _, code := range []string{"200", "400", "405", "413", "503"} {
		m.requests.WithLabelValues(code)
	}
	for _, status := range []string{"firing", "resolved"} {
		for _, action := range []string{delivery.ActionPushed, delivery.ActionFailed, ActionSkipped, delivery.ActionDuplicate, delivery.ActionHeld} {
			m.alerts.WithLabelValues(status, action)
		}
	}
	if reg == nil {
		return m, nil
	}
	return m, errors.Join(reg.Register(m.requests), reg.Register(m.alerts))
}

// ActionSkipped is the action of an alert filtered out or below the
// threshold: nothing was handed to delivery.
const ActionSkipped = "skipped"
