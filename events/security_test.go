package events_test

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/events"
	"github.com/turnstilelock/turnstile/events/internal/kafkatest"
	"github.com/turnstilelock/turnstile/internal/testcerts"
)

// kafkaPassword is every SASL user's password: no error may show it.
const kafkaPassword = "kafka-Secret-9d1b27"

// startSecureKafka runs an in-process cluster that takes TLS connections
// only, with the server certificate of certs (and, with clientAuth,
// requires client certificates of its authority), and SASL with a
// superuser per mechanism: "plain" (PLAIN), "scram256" (SCRAM-SHA-256)
// and "scram512" (SCRAM-SHA-512), all with kafkaPassword.
func startSecureKafka(t *testing.T, certs *testcerts.Set, clientAuth bool) *kfake.Cluster {
	t.Helper()
	srvTLS, err := certs.ServerConfig(clientAuth)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, events.Topic),
		kfake.TLS(srvTLS), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plain", kafkaPassword),
		kfake.Superuser("SCRAM-SHA-256", "scram256", kafkaPassword),
		kfake.Superuser("SCRAM-SHA-512", "scram512", kafkaPassword))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// consumeWith reads n records of the events topic from its start with a
// client of the given options.
func consumeWith(t *testing.T, seeds []string, n int, opts ...kgo.Opt) []events.Event {
	t.Helper()
	var out []events.Event
	kafkatest.Consume(t, seeds, n, func(r *kgo.Record) { out = append(out, decode(t, r.Value)) }, opts...)
	return out
}

// TestTLSAndSASL: over TLS, the brokers verified against the test
// authority, with each SASL mechanism (and a client certificate where
// the cluster requires one), events published — by Publish and by a
// Client observing its locks — are acknowledged and read back.
func TestTLSAndSASL(t *testing.T) {
	certs := testcerts.New(t)
	for _, tc := range []struct {
		name       string
		clientAuth bool
		tls        events.Option
		auth       events.Option
		consumer   kgo.Opt
	}{
		{"PLAIN", false, events.WithTLSFiles(certs.CA, "", "", ""), events.WithSASLPlain("plain", kafkaPassword),
			kgo.SASL(plain.Auth{User: "plain", Pass: kafkaPassword}.AsMechanism())},
		{"SCRAM-SHA-256", false, events.WithTLSFiles(certs.CA, "", "", "localhost"), events.WithSASLScram("SCRAM-SHA-256", "scram256", kafkaPassword),
			kgo.SASL(scram.Auth{User: "scram256", Pass: kafkaPassword}.AsSha256Mechanism())},
		{"SCRAM-SHA-512 and a client certificate", true, events.WithTLSFiles(certs.CA, certs.ClientCert, certs.ClientKey, ""), events.WithSASLScram("SCRAM-SHA-512", "scram512", kafkaPassword),
			kgo.SASL(scram.Auth{User: "scram512", Pass: kafkaPassword}.AsSha512Mechanism())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := startSecureKafka(t, certs, tc.clientAuth)
			k := newKafka(t, cluster.ListenAddrs(), tc.tls, tc.auth)
			ctx := ctxFor(t, 30*time.Second)
			ev := events.New(events.TypeAcquired, "lock:secure")
			if err := k.Publish(ctx, ev); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			c := newClient(t, k)
			l, err := c.Acquire(ctx, "lock:observed")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := k.Flush(ctx); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			if k.Dropped() != 0 || k.Published() != 3 {
				t.Fatalf("published %d, dropped %d; want 3 and 0", k.Published(), k.Dropped())
			}
			consumerTLS, err := certs.ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			got := consumeWith(t, cluster.ListenAddrs(), 3, kgo.DialTLSConfig(consumerTLS), tc.consumer)
			if got[0].ID != ev.ID || got[1].Key != "lock:observed" || got[1].Type != events.TypeAcquired || got[2].Type != events.TypeReleased {
				t.Fatalf("read back %+v", got)
			}
		})
	}
}

// TestSecurityRefused: a wrong password, brokers whose certificate the
// test authority did not sign, and plain text to the TLS listener each
// make Publish fail with an error that says what is wrong, and never
// shows the password; nothing is delivered.
func TestSecurityRefused(t *testing.T) {
	certs := testcerts.New(t)
	cluster := startSecureKafka(t, certs, false)
	for _, tc := range []struct {
		name string
		opts []events.Option
		want []string // one of them
	}{
		{"wrong password", []events.Option{events.WithTLSFiles(certs.CA, "", "", ""), events.WithSASLScram("SCRAM-SHA-256", "scram256", "not-"+kafkaPassword)},
			[]string{"SASL_AUTHENTICATION_FAILED", "check the user, password and mechanism"}},
		{"wrong PLAIN password", []events.Option{events.WithTLSFiles(certs.CA, "", "", ""), events.WithSASLPlain("plain", kafkaPassword+"-not")},
			[]string{"SASL_AUTHENTICATION_FAILED", "check the user, password and mechanism"}},
		{"other CA", []events.Option{events.WithTLSFiles(certs.OtherCA, "", "", ""), events.WithSASLPlain("plain", kafkaPassword)},
			[]string{"certificate signed by unknown authority"}},
		{"wrong server name", []events.Option{events.WithTLSFiles(certs.CA, "", "", "kafka.example.com"), events.WithSASLPlain("plain", kafkaPassword)},
			[]string{"not kafka.example.com"}},
		{"plain text to TLS", []events.Option{events.WithSASLPlain("plain", kafkaPassword)},
			[]string{"is TLS missing?", "is it expecting TLS?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := newKafka(t, cluster.ListenAddrs(), append(tc.opts, events.WithCloseTimeout(0))...)
			// The client retries until the context ends; the error then
			// says how the last connection failed.
			err := k.Publish(ctxFor(t, 8*time.Second), events.New(events.TypeAcquired, "lock:refused"))
			if err == nil {
				t.Fatal("Publish succeeded")
			}
			t.Log(err)
			if strings.Contains(err.Error(), kafkaPassword) {
				t.Fatalf("the error shows the password: %v", err)
			}
			ok := false
			for _, w := range tc.want {
				ok = ok || strings.Contains(err.Error(), w)
			}
			if !ok {
				t.Fatalf("Publish: %v; want an error saying one of %q", err, tc.want)
			}
		})
	}
}

// TestSecurityOptionsInvalid: bad TLS and SASL options make NewKafka fail
// with ErrInvalidOption before anything is dialled, naming what is
// wrong and not showing the password.
func TestSecurityOptionsInvalid(t *testing.T) {
	certs := testcerts.New(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seeds := []string{"127.0.0.1:1"}
	for _, tc := range []struct {
		name  string
		seeds []string
		opts  []events.Option
		want  string
	}{
		{"missing CA file", seeds, []events.Option{events.WithTLSFiles(certs.Dir+"/missing.pem", "", "", "")}, "ca_file"},
		{"key as CA", seeds, []events.Option{events.WithTLSFiles(certs.ClientKey, "", "", "")}, "no PEM certificate"},
		{"cert without key", seeds, []events.Option{events.WithTLSFiles(certs.CA, certs.ClientCert, "", "")}, "cert_file without key_file"},
		{"bad server name", seeds, []events.Option{events.WithTLSFiles(certs.CA, "", "", "a b")}, "server_name"},
		{"nil TLS", seeds, []events.Option{events.WithTLS(nil)}, "nil kafka TLS"},
		{"no verification", seeds, []events.Option{events.WithTLS(&tls.Config{InsecureSkipVerify: true})}, "must be verified"},
		{"TLS twice", seeds, []events.Option{events.WithTLS(&tls.Config{}), events.WithTLSFiles(certs.CA, "", "", "")}, "twice"},
		{"SASL twice", seeds, []events.Option{events.WithSASLPlain("u", kafkaPassword), events.WithSASLScram("SCRAM-SHA-256", "u", kafkaPassword)}, "give one mechanism"},
		{"SCRAM mechanism", seeds, []events.Option{events.WithSASLScram("SCRAM-MD5", "u", kafkaPassword)}, "SCRAM-SHA-256 or SCRAM-SHA-512"},
		{"no user", seeds, []events.Option{events.WithSASLPlain("", kafkaPassword)}, "user and a password"},
		{"no password", seeds, []events.Option{events.WithSASLScram("SCRAM-SHA-512", "u", "")}, "user and a password"},
		{"with WithClient", nil, []events.Option{events.WithClient(cl), events.WithSASLPlain("u", kafkaPassword)}, "set them on that client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := events.NewKafka(tc.seeds, tc.opts...)
			if err == nil {
				_ = k.Close()
				t.Fatal("NewKafka succeeded")
			}
			if !errors.Is(err, turnstile.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewKafka: %v; want ErrInvalidOption saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), kafkaPassword) {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}
