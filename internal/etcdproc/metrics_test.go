package etcdproc

import (
	"strings"
	"testing"
)

func TestCountStarted(t *testing.T) {
	const text = `# HELP grpc_server_started_total Total number of RPCs started on the server.
# TYPE grpc_server_started_total counter
grpc_server_started_total{grpc_method="Authenticate",grpc_service="etcdserverpb.Auth",grpc_type="unary"} 7
grpc_server_started_total{grpc_method="AuthEnable",grpc_service="etcdserverpb.Auth",grpc_type="unary"} 1
grpc_server_started_total{grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"} 3
grpc_server_handled_total{grpc_code="OK",grpc_method="Authenticate",grpc_service="etcdserverpb.Auth",grpc_type="unary"} 7
`
	for method, want := range map[string]int{"Authenticate": 7, "LeaseKeepAlive": 3, "Watch": 0} {
		got, err := countStarted(strings.NewReader(text), method)
		if err != nil || got != want {
			t.Errorf("countStarted(%s) = %d, %v; want %d", method, got, err, want)
		}
	}
	if _, err := countStarted(strings.NewReader(`grpc_server_started_total{grpc_method="Authenticate"} x`), "Authenticate"); err == nil {
		t.Error("a sample that is no number: no error")
	}
}
