// Package etcdproc runs single-member etcd servers on free loopback ports,
// for tests and benchmarks, in plain text or with TLS and client
// certificates, and turns on etcd's authentication with users and roles.
// It talks to etcd over HTTP (the /health endpoint and the JSON gateway
// of the v3 API), so it needs no etcd client.
package etcdproc

import (
	"bytes"
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile/internal/proc"
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// InstallHint is the command that installs etcd on Debian.
const InstallHint = "apt-get install -y etcd-server (or run ./scripts/test.sh)"

// ErrNotInstalled means etcd is not on PATH.
var ErrNotInstalled = errors.New("etcd not found on PATH; install it with: " + InstallHint)

// Server is a running etcd process.
type Server struct {
	bin        string
	dir        string
	clientPort int
	peerPort   int
	certs      *testcerts.Set // serve clients over TLS with these, or nil
	serverCert string         // etcd's certificate and key with TLS
	serverKey  string
	httpc      *http.Client // for /health and the JSON gateway

	// name and initialCluster make the server a member of a cluster
	// (StartCluster); "" for a single-member server. extra are more
	// etcd flags.
	name, initialCluster string
	extra                []string
	advertisePeer        string // the peer URL the member advertises, if not its own (WithPeerLinks)

	process // the running server: PID, Pause, Resume, Paused
}

// Available reports whether etcd is on PATH.
func Available() bool {
	_, err := exec.LookPath("etcd")
	return err == nil
}

// Start runs a single-member etcd on two free loopback ports (client and
// peer) with its data in dir. Stop it with Kill.
func Start(dir string) (*Server, error) { return start(dir, nil) }

// StartTLS runs a single-member etcd as Start does, serving clients over
// TLS only, with certs' server certificate, and requiring a client
// certificate signed by certs' authority (etcd's --client-cert-auth).
func StartTLS(dir string, certs *testcerts.Set) (*Server, error) {
	if certs == nil {
		return nil, errors.New("etcdproc: StartTLS without certificates")
	}
	return start(dir, certs)
}

func start(dir string, certs *testcerts.Set) (*Server, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, ErrNotInstalled
	}
	s := &Server{bin: bin, dir: dir, certs: certs, httpc: &http.Client{Timeout: time.Second}}
	if certs != nil {
		cfg, err := certs.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcdproc: %w", err)
		}
		s.httpc.Transport = &http.Transport{TLSClientConfig: cfg}
		s.serverCert, s.serverKey = filepath.Join(dir, "etcd-server.pem"), filepath.Join(dir, "etcd-server-key.pem")
		if err := dualUseCert(certs, s.serverCert, s.serverKey); err != nil {
			return nil, fmt.Errorf("etcdproc: server certificate: %w", err)
		}
	}
	if err := proc.OnFreePorts(5, s.start, &s.clientPort, &s.peerPort); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	return s, nil
}

// Addr is the client host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.clientPort)) }

// Endpoint is the client URL, http://host:port (https:// with TLS), as
// etcd clients want it.
func (s *Server) Endpoint() string {
	if s.certs != nil {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// URL is the server's turnstile URL, etcd://host:port; with TLS it names
// the authority and the client certificate, as in
// etcd://host:port?ca_file=…&cert_file=…&key_file=….
func (s *Server) URL() string {
	if s.certs == nil {
		return "etcd://" + s.Addr()
	}
	return "etcd://" + s.Addr() + "?" + TLSQuery(s.certs)
}

// TLSQuery is the query of a turnstile URL that trusts certs' authority
// and presents its client certificate.
func TLSQuery(certs *testcerts.Set) string {
	return url.Values{"ca_file": {certs.CA}, "cert_file": {certs.ClientCert}, "key_file": {certs.ClientKey}}.Encode()
}

// Certs are the certificates a server started by StartTLS uses, or nil.
func (s *Server) Certs() *testcerts.Set { return s.certs }

// LogPath is the server's log file (its standard output and error),
// which a restart appends to.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "etcd.log") }

func (s *Server) start() error {
	client := s.Endpoint()
	peer := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.peerPort))
	logPath := s.LogPath()
	logf, err := proc.OpenLog(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	name, initialCluster := "turnstile-test", "turnstile-test="+peer
	if s.name != "" {
		name, initialCluster = s.name, s.initialCluster
	}
	args := []string{
		"--name", name,
		"--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", cmp.Or(s.advertisePeer, peer),
		"--initial-cluster", initialCluster,
		"--initial-cluster-state", "new",
		"--logger", "zap",
		"--log-level", "warn",
	}
	if s.certs != nil {
		args = append(args, TLSFlags(s.serverCert, s.serverKey, s.certs.CA)...)
	}
	args = append(args, s.extra...)
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	proc.DieWithParent(cmd)
	exited, err := proc.Start(cmd, "etcd", logPath, 20*time.Second, 20*time.Millisecond, s.healthy)
	if err != nil {
		return err
	}
	proc.Started(&s.process, cmd, exited)
	return nil
}

// healthy asks etcd's /health endpoint, which answers true once the
// member has a leader and serves requests.
func (s *Server) healthy() bool {
	resp, err := s.httpc.Get(s.Endpoint() + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	s.httpc.CloseIdleConnections()
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"health":"true"`)
}

// TLSFlags are the flags of an etcd that serves clients over TLS with
// the certificate cert and its key, and accepts only clients with a
// certificate signed by the authorities in ca.
func TLSFlags(cert, key, ca string) []string {
	return []string{
		"--cert-file", cert,
		"--key-file", key,
		"--trusted-ca-file", ca,
		"--client-cert-auth",
	}
}

// dualUseCert writes a certificate for the loopback addresses and
// localhost, signed by certs' authority, that serves both as a server's
// and as a client's, and its key: etcd's JSON gateway calls etcd's gRPC
// API with the server's own certificate, which --client-cert-auth then
// checks as a client's.
func dualUseCert(certs *testcerts.Set, certPath, keyPath string) error {
	ca, err := tls.LoadX509KeyPair(certs.CA, certs.CAKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost", Organization: []string{"turnstile tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		return err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600)
}

// User is an etcd user for EnableAuth to add.
type User struct {
	Name, Password string
	// Prefix, if not "", gives the user a role of its own name that may
	// read and write every key that starts with Prefix (the range
	// [Prefix, PrefixEnd(Prefix))): the least a turnstile client with
	// that key prefix needs. With Prefix "" the user has no role and may
	// touch no key.
	Prefix string
}

// EnableAuth turns etcd's authentication on, as an operator does: it
// adds the user root with rootPassword and the role root, grants root
// the role, adds users, each with its role, and then enables auth. (With
// --client-cert-auth etcd's JSON gateway cannot log in once auth is on,
// so everything is set up before.)
func (s *Server) EnableAuth(rootPassword string, users ...User) error {
	type call struct {
		path string
		body any
	}
	calls := []call{
		{"/v3/auth/user/add", map[string]string{"name": "root", "password": rootPassword}},
		{"/v3/auth/role/add", map[string]string{"name": "root"}},
		{"/v3/auth/user/grant", map[string]string{"user": "root", "role": "root"}},
	}
	for _, u := range users {
		calls = append(calls, call{"/v3/auth/user/add", map[string]string{"name": u.Name, "password": u.Password}})
		if u.Prefix == "" {
			continue
		}
		perm := map[string]any{
			"name": u.Name,
			"perm": map[string]string{
				"permType":  "READWRITE",
				"key":       base64.StdEncoding.EncodeToString([]byte(u.Prefix)),
				"range_end": base64.StdEncoding.EncodeToString(PrefixEnd(u.Prefix)),
			},
		}
		calls = append(calls,
			call{"/v3/auth/role/add", map[string]string{"name": u.Name}},
			call{"/v3/auth/role/grant", perm},
			call{"/v3/auth/user/grant", map[string]string{"user": u.Name, "role": u.Name}},
		)
	}
	calls = append(calls, call{"/v3/auth/enable", map[string]string{}})
	for _, c := range calls {
		if err := s.gateway(c.path, c.body, nil); err != nil {
			return err
		}
	}
	return nil
}

// PrefixEnd is the end of the key range of the keys that start with
// prefix, as etcdctl --prefix computes it: prefix with its last byte
// below 0xff incremented and what follows dropped.
func PrefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0} // every key
}

// gateway posts body as JSON to path on etcd's JSON gateway of the v3
// API and decodes the answer into out.
func (s *Server) gateway(path string, body, out any) error {
	return s.gatewayWithin(10*time.Second, path, body, out)
}

// gatewayWithin is gateway with a timeout of its own: short for the
// questions a fault-injection test asks of a member that may be paused.
func (s *Server) gatewayWithin(timeout time.Duration, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, s.Endpoint()+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	c := *s.httpc
	c.Timeout = timeout
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("etcdproc: %s: %w", path, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcdproc: %s: %s: %s", path, resp.Status, bytes.TrimSpace(answer))
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return fmt.Errorf("etcdproc: %s: %w", path, err)
		}
	}
	return nil
}

// Kill stops the server with SIGKILL and waits until it has exited.
func (s *Server) Kill() { s.process.Kill() }
