// Fenced-register is storage that checks fencing tokens, behind a small
// HTTP endpoint: one register per resource, guarded by fence.Memory, so
// that a write whose token is not above the last accepted one is refused.
// The Python and Java clients' examples (clients/) write to it with their
// lease's token to replay the GC-pause incident.
//
//	go run ./examples/fenced-register --listen 127.0.0.1:7080
//
//	POST /write {"resource": "order:42", "token": 17, "value": "paid"}
//	     200 {"resource": ..., "token": 17, "value": "paid"}: written
//	     409 {"error": "stale fencing token 17 ...", "token": 17, "last": 18}: refused
//	GET  /read?resource=order:42
//	     200 {"resource": ..., "token": 18, "value": ...}
//
// It prints "fenced-register: listening on http://ADDR" once it serves, and
// stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/turnstilelock/turnstile/fence"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:7080", "where to serve, host:port (port 0: any free port)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *listen, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fenced-register:", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, addr string, out io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newRegister().handler(), ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(out, "fenced-register: listening on http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// register holds one value per resource, written only with a fresh token.
type register struct {
	guard  *fence.Memory
	mu     sync.Mutex
	values map[string]string
}

func newRegister() *register {
	return &register{guard: fence.NewMemory(), values: map[string]string{}}
}

// maxBody bounds a write's body.
const maxBody = 64 << 10

type entry struct {
	Resource string `json:"resource"`
	Token    uint64 `json:"token"`
	Value    string `json:"value"`
}

func (r *register) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", r.write)
	mux.HandleFunc("GET /read", r.read)
	return mux
}

func (r *register) write(w http.ResponseWriter, req *http.Request) {
	var e entry
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		reply(w, http.StatusBadRequest, map[string]any{"error": "want {\"resource\": STRING, \"token\": NUMBER, \"value\": STRING}: " + err.Error()})
		return
	}
	// The value is recorded in the guard's step: the token check and the
	// write are one atomic step.
	err := r.guard.Do(e.Resource, e.Token, func() error {
		r.mu.Lock()
		r.values[e.Resource] = e.Value
		r.mu.Unlock()
		return nil
	})
	var stale *fence.StaleTokenError
	switch {
	case errors.As(err, &stale):
		reply(w, http.StatusConflict, map[string]any{"error": err.Error(), "token": stale.Token, "last": stale.Last})
	case err != nil:
		reply(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
	default:
		reply(w, http.StatusOK, e)
	}
}

func (r *register) read(w http.ResponseWriter, req *http.Request) {
	res := req.URL.Query().Get("resource")
	r.mu.Lock()
	v := r.values[res]
	r.mu.Unlock()
	reply(w, http.StatusOK, entry{Resource: res, Token: r.guard.Last(res), Value: v})
}

func reply(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
