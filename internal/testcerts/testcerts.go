// Package testcerts makes the certificates of TLS tests at test time: a
// certificate authority, a server certificate for the loopback addresses
// signed by it, a client certificate signed by it, a second authority
// that signed neither, for the tests of a wrong CA, and a file that is
// not PEM. Nothing of it is committed; every call makes new keys.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Set is one set of PEM files, in one directory.
type Set struct {
	Dir string
	// CA is the authority's certificate, which signed Server and Client.
	CA string
	// CAKey is the authority's private key (some servers want it, such as
	// ZooKeeper's keystore tools; most do not).
	CAKey string
	// ServerCert and ServerKey are for 127.0.0.1, ::1 and localhost.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client's, with common name "client".
	ClientCert, ClientKey string
	// OtherCA is an authority that signed nothing here.
	OtherCA string
	// NotPEM is a file that holds no PEM block, and Missing a path in
	// Dir where no file is, for the tests of bad file parameters.
	NotPEM, Missing string
}

// New writes a fresh Set into a temporary directory of t.
func New(t testing.TB) *Set {
	t.Helper()
	s, err := Write(t.TempDir())
	if err != nil {
		t.Fatalf("testcerts: %v", err)
	}
	return s
}

// Write writes a fresh Set into dir.
func Write(dir string) (*Set, error) {
	s := &Set{
		Dir:        dir,
		CA:         filepath.Join(dir, "ca.pem"),
		CAKey:      filepath.Join(dir, "ca-key.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client-key.pem"),
		OtherCA:    filepath.Join(dir, "other-ca.pem"),
		NotPEM:     filepath.Join(dir, "not.pem"),
		Missing:    filepath.Join(dir, "missing.pem"),
	}
	ca, caKey, err := authority("turnstile test CA")
	if err != nil {
		return nil, err
	}
	other, _, err := authority("some other CA")
	if err != nil {
		return nil, err
	}
	server, serverKey, err := leaf(ca, caKey, "localhost", x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	client, clientKey, err := leaf(ca, caKey, "client", x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.NotPEM, []byte("not a certificate\n"), 0o600); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		path string
		der  []byte
		key  *ecdsa.PrivateKey
	}{
		{s.CA, ca.Raw, nil}, {s.CAKey, nil, caKey},
		{s.ServerCert, server.Raw, nil}, {s.ServerKey, nil, serverKey},
		{s.ClientCert, client.Raw, nil}, {s.ClientKey, nil, clientKey},
		{s.OtherCA, other.Raw, nil},
	} {
		if err := writePEM(f.path, f.der, f.key); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ClientConfig is a client's tls.Config that trusts the Set's authority
// and presents its client certificate.
func (s *Set) ClientConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(s.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	pair, err := tls.LoadX509KeyPair(s.ClientCert, s.ClientKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// ServerConfig is a server's tls.Config with the Set's server
// certificate; with clientAuth it requires client certificates signed by
// the Set's authority.
func (s *Set) ServerConfig(clientAuth bool) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(s.ServerCert, s.ServerKey)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if clientAuth {
		pem, err := os.ReadFile(s.CA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// nextSerial is a random serial number, as RFC 5280 wants them unique
// per authority.
func nextSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func authority(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	return issue(&x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"turnstile tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil)
}

func leaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"turnstile tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	return issue(tmpl, ca, caKey)
}

// issue makes a certificate of tmpl for a new key, signed by ca with
// caKey, or by the new key itself when ca is nil.
func issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if ca == nil {
		ca, caKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// writePEM writes a certificate (der) or a private key, readable by its
// owner only.
func writePEM(path string, der []byte, key *ecdsa.PrivateKey) error {
	block := &pem.Block{Type: "CERTIFICATE", Bytes: der}
	if key != nil {
		b, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: b}
	}
	return os.WriteFile(path, pem.EncodeToMemory(block), 0o600)
}
