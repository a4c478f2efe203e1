package heartbeat

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/lavender-ml/lavender/phaseapi"
)

// ClientConfig is how `lavender phase` reaches the phase server: the
// password and the CA come from files, so that no secret is on the
// command line (ps, shell history). Its errors name the flags.
type ClientConfig struct {
	URL          string
	Username     string
	PasswordFile string // the password, a trailing newline ignored
	CAFile       string // PEM of the CA that signed the server's certificate, for a private CA
	Timeout      time.Duration
}

// Open reads the files and returns the client.
func (cfg ClientConfig) Open() (*Client, error) {
	httpClient := &http.Client{Timeout: cfg.Timeout}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--tls.ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls.ca-file %s: no PEM certificate in it", cfg.CAFile)
		}
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		httpClient.Transport = transport
	}
	opts := []ClientOption{WithHTTPClient(httpClient)}
	if cfg.PasswordFile != "" || cfg.Username != "" {
		if cfg.Username == "" {
			return nil, errors.New("--password-file needs --username")
		}
		password := ""
		if cfg.PasswordFile != "" {
			data, err := os.ReadFile(cfg.PasswordFile)
			if err != nil {
				return nil, fmt.Errorf("password file: %w", err)
			}
			password = strings.TrimRight(string(data), "\r\n")
		}
		opts = append(opts, WithBasicAuth(cfg.Username, password))
	}
	c, err := NewClient(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	return c, nil
}

// Event sends one heartbeat as `lavender phase start|ping|end` does: a
// start reports the working directory (WorkDirs), and a total of 0 is
// refused here, before a request, with the flag's name. warning is what the
// exporter said it left out of an event it took (an end's contradictory
// step and total), for the command to print.
func (c *Client) Event(ctx context.Context, req phaseapi.HeartbeatRequest) (warning string, err error) {
	if req.Total != nil && *req.Total == 0 {
		return "", errors.New("--total must be 1 or more")
	}
	if req.Event == phaseapi.EventStart {
		req.Dirs = WorkDirs()
	}
	resp, err := c.Heartbeat(ctx, req)
	return resp.Warning, err
}
