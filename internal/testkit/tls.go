package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"maps"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"
	"golang.org/x/crypto/bcrypt"
)

// TLSFiles are a private CA and a server certificate it signed for
// 127.0.0.1 (and "localhost"), written as PEM files in a temp dir.
type TLSFiles struct {
	Dir      string
	CAFile   string // the CA certificate: what --tls.ca-file takes
	CertFile string // the server certificate
	KeyFile  string // its key, mode 0600
	// Pool trusts the CA and nothing else.
	Pool *x509.CertPool
	// Certificate is the server certificate and key, for an in-process
	// server's tls.Config.
	Certificate tls.Certificate
}

// NewTLS makes a CA and a server certificate valid for a day around now.
func NewTLS(t testing.TB) *TLSFiles {
	t.Helper()
	dir := t.TempDir()
	fail := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("testkit: self-signed TLS: %v", err)
		}
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	fail(err)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "lavender test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	fail(err)
	ca, err := x509.ParseCertificate(caDER)
	fail(err)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	fail(err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	fail(err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	fail(err)

	f := &TLSFiles{
		Dir:      dir,
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "cert.pem"),
		KeyFile:  filepath.Join(dir, "key.pem"),
		Pool:     x509.NewCertPool(),
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	fail(os.WriteFile(f.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644))
	fail(os.WriteFile(f.CertFile, certPEM, 0o644))
	fail(os.WriteFile(f.KeyFile, keyPEM, 0o600))
	f.Pool.AddCert(ca)
	f.Certificate, err = tls.X509KeyPair(certPEM, keyPEM)
	fail(err)
	return f
}

// ClientConfig trusts the CA only.
func (f *TLSFiles) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: f.Pool, MinVersion: tls.VersionTLS12}
}

// ServerConfig serves the certificate, for an in-process server.
func (f *TLSFiles) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{f.Certificate}, MinVersion: tls.VersionTLS12}
}

// Client is an HTTP client that trusts the CA only, with a 30 s timeout.
func (f *TLSFiles) Client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = f.ClientConfig()
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

// WebConfig is what WriteWebConfig puts in an exporter-toolkit web config
// (--web.config.file).
type WebConfig struct {
	// TLS, if set, serves its certificate (tls_server_config).
	TLS *TLSFiles
	// Users are basic-auth users and their plain passwords; the file holds
	// their bcrypt hashes (basic_auth_users).
	Users map[string]string
}

// WriteWebConfig writes c as web-config.yml in a fresh temp dir, mode
// 0600, and returns its path. bcrypt runs at its minimum cost: the file is
// for tests.
func WriteWebConfig(t testing.TB, c WebConfig) string {
	t.Helper()
	type tlsServerConfig struct {
		CertFile string `yaml:"cert_file"`
		KeyFile  string `yaml:"key_file"`
	}
	var doc struct {
		TLS   *tlsServerConfig `yaml:"tls_server_config,omitempty"`
		Users yaml.MapSlice    `yaml:"basic_auth_users,omitempty"`
	}
	if c.TLS != nil {
		doc.TLS = &tlsServerConfig{CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile}
	}
	for _, u := range slices.Sorted(maps.Keys(c.Users)) {
		hash, err := bcrypt.GenerateFromPassword([]byte(c.Users[u]), bcrypt.MinCost)
		if err != nil {
			t.Fatalf("testkit: web config: %v", err)
		}
		doc.Users = append(doc.Users, yaml.MapItem{Key: u, Value: string(hash)})
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatalf("testkit: web config: %v", err)
	}
	path := filepath.Join(t.TempDir(), "web-config.yml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("testkit: web config: %v", err)
	}
	return path
}
