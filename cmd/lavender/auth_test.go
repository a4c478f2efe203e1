package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// TestPhaseOverTLS: `lavender phase` reaches an exporter behind TLS with a
// private CA through --tls.ca-file, and refuses it without.
func TestPhaseOverTLS(t *testing.T) {
	const user, pass = "trainer", "s3cret"
	certs := testkit.NewTLS(t)
	webConfig := testkit.WriteWebConfig(t, testkit.WebConfig{TLS: certs, Users: map[string]string{user: pass}})
	exporter := startInProcess(t, nil, "exporter", "--path.procfs="+testkit.SwapProcfs(t, 0.10),
		"--runlog.dir="+t.TempDir(), "--web.config.file="+webConfig)
	base := "https://" + strings.TrimPrefix(exporter.base, "http://")
	testkit.WaitReady(t, certs.Client(), base, user, pass)
	passwordFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(passwordFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"phase", "start", "Train", "--url", base, "--username", user, "--password-file", passwordFile}
	if _, _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without --tls.ca-file: %v, want a certificate error", err)
	}
	if _, _, err := runCLI(t, append(args, "--tls.ca-file", certs.CAFile)...); err != nil {
		t.Errorf("with --tls.ca-file: %v", err)
	}
	if _, _, err := runCLI(t, append(args, "--tls.ca-file", passwordFile)...); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("with a CA file that is not PEM: %v", err)
	}
}
