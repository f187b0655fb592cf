package storeurl

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// TLS is what the TLS parameters of a URL say. Every scheme that speaks
// TLS takes the same four, by the same names:
//
//	ca_file      PEM file of the certificate authorities that sign the
//	             server's certificate (default: the system's roots)
//	cert_file    PEM file of the client's certificate, for servers that
//	             verify their clients; key_file goes with it
//	key_file     PEM file of the private key of cert_file
//	server_name  the name the server's certificate must carry (default:
//	             the host dialled)
//
// The files are read when the URL is, so that a missing, unreadable or
// malformed file is an error of the URL, before anything is dialled.
// The server's certificate is always verified: no parameter turns that
// off.
type TLS struct {
	CAFile, CertFile, KeyFile, ServerName string
	on, off                               bool // tls=on, tls=off (SwitchParams)
}

// TLSParamNames are the names of the TLS parameters, in order.
var TLSParamNames = []string{"ca_file", "cert_file", "key_file", "server_name"}

// Params adds the TLS parameters to known, storing their values in t,
// and returns known.
func (t *TLS) Params(known map[string]Param) map[string]Param {
	known["ca_file"] = Store(&t.CAFile, nonEmpty)
	known["cert_file"] = Store(&t.CertFile, nonEmpty)
	known["key_file"] = Store(&t.KeyFile, nonEmpty)
	known["server_name"] = Store(&t.ServerName, hostName)
	return known
}

// SwitchParams adds the TLS parameters and the switch tls=on|off to
// known, for a scheme whose name does not say whether it speaks TLS, and
// returns known. tls=on turns TLS on with the system's roots; tls=off
// with a TLS parameter is a contradiction, which Enabled reports.
func (t *TLS) SwitchParams(known map[string]Param) map[string]Param {
	known["tls"] = func(v string) (err error) {
		t.on, err = OnOff(v)
		t.off = err == nil && !t.on
		return err
	}
	return t.Params(known)
}

// Enabled reports whether the URL asked for TLS: tls=on or a TLS
// parameter; with tls=off and a TLS parameter it says that they
// contradict each other.
func (t *TLS) Enabled() (bool, error) {
	if t.off {
		if err := t.RefuseWithout("tls=on, or leave tls out"); err != nil {
			return false, fmt.Errorf("tls=off, but %w", err)
		}
		return false, nil
	}
	return t.on || t.Given(), nil
}

// Given reports whether the URL set any TLS parameter.
func (t *TLS) Given() bool { return len(t.names()) > 0 }

// names names the TLS parameters the URL set.
func (t *TLS) names() []string {
	var names []string
	for i, v := range []string{t.CAFile, t.CertFile, t.KeyFile, t.ServerName} {
		if v != "" {
			names = append(names, TLSParamNames[i])
		}
	}
	return names
}

// RefuseWithout returns an error naming the TLS parameters the URL set,
// which need TLS, and what turns TLS on (such as "rediss://"); nil if it
// set none.
func (t *TLS) RefuseWithout(how string) error {
	if names := t.names(); len(names) > 0 {
		return fmt.Errorf("%s need%s TLS: use %s", strings.Join(names, ", "), map[bool]string{true: "s"}[len(names) == 1], how)
	}
	return nil
}

// Config returns the client's TLS configuration: TLS 1.2 or later, the
// server verified against ca_file's authorities (or the system's) under
// server_name (or the host dialled), and the client certificate if
// cert_file and key_file name one. Its errors name the parameter and
// say what is wrong with the file, never what is in it.
func (t *TLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pool, err := ReadCAs(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file=%q: %w", t.CAFile, err)
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		return nil, errors.New("cert_file without key_file: a client certificate needs its private key")
	case t.CertFile == "" && t.KeyFile != "":
		return nil, errors.New("key_file without cert_file: a private key needs its client certificate")
	case t.CertFile != "":
		if err := readable("cert_file", t.CertFile); err != nil {
			return nil, err
		}
		if err := readable("key_file", t.KeyFile); err != nil {
			return nil, err
		}
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			// crypto/tls says what is wrong without quoting the key.
			return nil, fmt.Errorf("cert_file=%q and key_file=%q: %v", t.CertFile, t.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// readable says which parameter names a file that cannot be read.
func readable(param, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", param, path, fileErr(err))
	}
	return f.Close()
}

// fileErr is err without the path, which the caller names.
func fileErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ReadCAs reads a PEM file of certificates into a pool. An error
// reading the file leaves its path out, for the caller to name.
func ReadCAs(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fileErr(err)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %v", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate in the file")
	}
	return pool, nil
}

func nonEmpty(v string) (string, error) {
	if v == "" {
		return "", errors.New("is empty")
	}
	return v, nil
}

// hostName reads a server name: a DNS name or an IP address, without
// port, brackets or spaces.
func hostName(v string) (string, error) {
	if net.ParseIP(v) != nil {
		return v, nil
	}
	if v == "" || strings.ContainsAny(v, " :/[]@?#%\t\r\n") {
		return "", errors.New("is not a host name such as redis.example.com")
	}
	return v, nil
}

// OnOff reads on or off (also true, false, 1, 0, in any case).
func OnOff(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	}
	return false, errors.New("is not on or off")
}
