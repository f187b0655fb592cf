package redisproc

import "testing"

// TestTurnstileURL: the URLs of a server, a cluster and a Sentinel group,
// in plain text and in TLS.
func TestTurnstileURL(t *testing.T) {
	tl := &TLS{CA: "/c/ca.pem", ClientCert: "/c/cert.pem", ClientKey: "/c/key.pem"}
	files := "?ca_file=%2Fc%2Fca.pem&cert_file=%2Fc%2Fcert.pem&key_file=%2Fc%2Fkey.pem"
	for _, c := range []struct {
		got, want string
	}{
		{(&Server{port: 7000}).URL(), "redis://127.0.0.1:7000"},
		{(&Server{port: 7000, tls: tl}).URL(), "rediss://127.0.0.1:7000" + files},
		{(&Cluster{nodes: []*Server{{port: 7000}, {port: 7001}}}).URL(), "redis://127.0.0.1:7000,127.0.0.1:7001"},
		{(&Cluster{nodes: []*Server{{port: 7000}, {port: 7001}}, tls: tl}).URL(), "rediss://127.0.0.1:7000,127.0.0.1:7001" + files},
		{(&Sentinel{sentinels: []*Server{{port: 26379}, {port: 26380}}}).URL(), "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/" + SentinelMasterSet},
		{(&Sentinel{sentinels: []*Server{{port: 26379}}, tls: tl}).URL(), "rediss+sentinel://127.0.0.1:26379/" + SentinelMasterSet + files},
	} {
		if c.got != c.want {
			t.Errorf("URL %q, want %q", c.got, c.want)
		}
	}
}
