package redisproc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// TLS is what a server started with StartTLS (or a cluster started with
// StartClusterTLS) needs to speak TLS: PEM files, as package testcerts
// writes them.
type TLS struct {
	// CA is the authority that signed ServerCert and ClientCert; the
	// server trusts the clients it signed.
	CA string
	// ServerCert and ServerKey are the server's certificate and key.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are the certificate that Server.Do and
	// the URL present.
	ClientCert, ClientKey string
	// AuthClients makes the server refuse clients without a certificate
	// signed by CA (--tls-auth-clients yes); otherwise it asks for none
	// (--tls-auth-clients no).
	AuthClients bool
}

// args are the redis-server arguments of t, but for the ports.
func (t *TLS) args() []string {
	auth := "no"
	if t.AuthClients {
		auth = "yes"
	}
	return []string{
		"--tls-cert-file", t.ServerCert,
		"--tls-key-file", t.ServerKey,
		"--tls-ca-cert-file", t.CA,
		"--tls-auth-clients", auth,
	}
}

// Query is the query of a turnstile URL that trusts CA and presents the
// client certificate: ca_file=...&cert_file=...&key_file=...
func (t *TLS) Query() string {
	return "ca_file=" + url.QueryEscape(t.CA) +
		"&cert_file=" + url.QueryEscape(t.ClientCert) +
		"&key_file=" + url.QueryEscape(t.ClientKey)
}

// turnstileURL is the turnstile URL of Redis servers at hosts
// (comma-separated), under path: scheme redis+kind (kind "" or
// "+sentinel"), or rediss+kind with t's files in its query when t is not
// nil.
func turnstileURL(t *TLS, kind string, hosts []string, path string) string {
	if t == nil {
		return "redis" + kind + "://" + strings.Join(hosts, ",") + path
	}
	return "rediss" + kind + "://" + strings.Join(hosts, ",") + path + "?" + t.Query()
}

// ClientConfig is the configuration of a Go client that trusts CA and
// presents the client certificate.
func (t *TLS) ClientConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(t.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", t.CA)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if t.ClientCert != "" {
		pair, err := tls.LoadX509KeyPair(t.ClientCert, t.ClientKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// setTLS makes s speak TLS with the files of t.
func (s *Server) setTLS(t TLS) error {
	if t.CA == "" || t.ServerCert == "" || t.ServerKey == "" {
		return errors.New("TLS needs CA, ServerCert and ServerKey")
	}
	if t.AuthClients && t.ClientCert == "" {
		return errors.New("TLS with AuthClients needs ClientCert and ClientKey, for the checks that the server answers")
	}
	cfg, err := t.ClientConfig()
	if err != nil {
		return err
	}
	s.tls, s.dial = &t, cfg
	return nil
}
