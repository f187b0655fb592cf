package testcerts_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"testing"

	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// TestHandshake: a client with the Set's CA and client certificate talks
// to a server that requires it; a client trusting the other CA is
// refused with an unknown-authority error.
func TestHandshake(t *testing.T) {
	s := testcerts.New(t)
	scfg, err := s.ServerConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	ccfg, err := s.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		ccfg := ccfg.Clone()
		ccfg.ServerName = host
		c, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
		if err != nil {
			t.Fatalf("as %s: %v", host, err)
		}
		c.Close()
	}
	other, err := os.ReadFile(s.OtherCA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(other)
	_, err = tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("other CA: got %v, want an unknown authority", err)
	}
}
