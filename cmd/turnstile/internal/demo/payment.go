//go:build unix

package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/turnstilelock/turnstile"
	"github.com/turnstilelock/turnstile/idempotency"
)

// The retried payment: the payment provider takes 300 ms,
// the client gives up after 100 ms and sends the same request again.
const (
	payCharge        = 300 * time.Millisecond
	payFirstTimeout  = 100 * time.Millisecond
	payRetryTimeout  = 2 * time.Second
	payRetryInterval = 500 * time.Millisecond
	payAttempts      = 4
)

// paymentServer is the shop's payment endpoint, charging through the
// (simulated) provider into a ledger kept in Redis.
type paymentServer struct {
	env     *environment
	variant string
	run     string
	idem    idempotency.Store
	client  *turnstile.Client
}

func (s *paymentServer) ledger() string { return "demo:pay:{" + s.run + "}:charges" }

// charge calls the provider: it takes payCharge and always completes,
// whether or not the client is still waiting for the answer.
func (s *paymentServer) charge(ctx context.Context, order string) ([]byte, error) {
	if err := sleepCtx(ctx, payCharge); err != nil {
		return nil, err
	}
	rc := s.env.rc
	n, err := rc.Do(ctx, rc.B().Rpush().Key(s.ledger()).Element(order).Build()).AsInt64()
	if err != nil {
		return nil, err
	}
	return []byte("charged ch_" + strconv.FormatInt(n, 10) + " for " + order), nil
}

func (s *paymentServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	order := r.URL.Query().Get("order")
	// The provider's call outlives the client's patience, as in the
	// incident: a timeout on the client does not undo the charge.
	ctx := context.WithoutCancel(r.Context())
	if s.variant == "naive" {
		body, err := s.charge(ctx, order)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(body)
		return
	}
	body, replayed, err := s.idem.Do(ctx, "payment:"+r.Header.Get("Idempotency-Key"), func(ctx context.Context) ([]byte, error) {
		var body []byte
		err := turnstile.Do(ctx, s.client, "lock:payment:"+s.run+":"+order, func(ctx context.Context, _ *turnstile.Lease) error {
			var err error
			body, err = s.charge(ctx, order)
			return err
		})
		return body, err
	})
	switch {
	case errors.Is(err, idempotency.ErrInProgress):
		http.Error(w, "in progress", http.StatusConflict)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		if replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		_, _ = w.Write(body)
	}
}

// runDoublePayment runs the retried payment without and with an
// idempotency key plus a lock.
func runDoublePayment(ctx context.Context, env *environment) ([]result, error) {
	return runVariants(ctx, env, []string{"naive", "idempotency+lock"}, runPaymentVariant)
}

func runPaymentVariant(ctx context.Context, env *environment, variant string) (result, error) {
	s := &paymentServer{env: env, variant: variant, run: variant + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	store := "redis"
	if variant != "naive" {
		var err error
		if env.pool != nil {
			store = "postgres"
			if err = idempotency.Migrate(ctx, env.pool); err == nil {
				s.idem, err = idempotency.NewPostgres(env.pool)
			}
		} else {
			s.idem, err = idempotency.NewRedis(env.rc)
		}
		if err != nil {
			return result{}, err
		}
		if s.client, err = env.newClient(turnstile.WithInstanceID("payments")); err != nil {
			return result{}, err
		}
		defer s.client.Close()
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx) // waits for the charges in flight
			<-served
		}
	}
	defer stop()

	url := "http://" + ln.Addr().String() + "/pay?order=order-7"
	requestID := "req-" + s.run
	var answers []string
	final := ""
	for attempt := 1; attempt <= payAttempts && final == ""; attempt++ {
		timeout := payRetryTimeout
		if attempt == 1 {
			timeout = payFirstTimeout
		}
		status, body, err := postPayment(ctx, url, requestID, timeout)
		switch {
		case ctx.Err() != nil:
			return result{}, ctx.Err()
		case err != nil:
			answers = append(answers, fmt.Sprintf("#%d timed out after %v", attempt, timeout))
		case status == http.StatusConflict:
			answers = append(answers, fmt.Sprintf("#%d %q", attempt, body))
			if err := sleepCtx(ctx, payRetryInterval); err != nil {
				return result{}, err
			}
		default:
			answers = append(answers, fmt.Sprintf("#%d %q", attempt, body))
			if status == http.StatusOK {
				final = body
			}
		}
		env.progress("double-payment %s: attempt %s", variant, answers[len(answers)-1])
	}
	stop()
	rc := env.rc
	charges, err := rc.Do(ctx, rc.B().Llen().Key(s.ledger()).Build()).AsInt64()
	if err != nil {
		return result{}, err
	}

	r := result{Variant: variant, Naive: variant == "naive"}
	r.OK = charges == 1 && final != ""
	switch {
	case charges > 1:
		r.Summary = fmt.Sprintf("customer charged %d times for one payment; answers: %s", charges, strings.Join(answers, ", "))
	case r.OK:
		r.Summary = fmt.Sprintf("charged once; answers: %s", strings.Join(answers, ", "))
	default:
		r.Summary = fmt.Sprintf("%d charges, final answer %q; answers: %s", charges, final, strings.Join(answers, ", "))
	}
	r.add("store", store)
	r.add("attempts", len(answers))
	r.add("charges", charges)
	r.add("answers", answers)
	r.add("final_answer", final)
	return r, nil
}

// postPayment sends the payment request and returns the status and body.
func postPayment(ctx context.Context, url, requestID string, timeout time.Duration) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Idempotency-Key", requestID)
	// A new connection per attempt, as a client that timed out would make.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	body := strings.TrimSpace(string(b))
	if resp.Header.Get("Idempotent-Replayed") == "true" {
		body += " (replayed)"
	}
	return resp.StatusCode, body, err
}
