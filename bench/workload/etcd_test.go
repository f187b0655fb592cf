package workload

import (
	"strings"
	"testing"
)

const etcdMetrics = `# HELP grpc_server_msg_received_total Total number of RPC stream messages received on the server.
# TYPE grpc_server_msg_received_total counter
grpc_server_msg_received_total{grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"} 12
grpc_server_msg_received_total{grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"} 3
grpc_server_msg_received_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 0
etcd_server_proposals_committed_total 1234
etcd_disk_wal_fsync_duration_seconds_count 77
process_cpu_seconds_total 1.5
go_goroutines 40
`

func TestParseEtcdMetrics(t *testing.T) {
	s, err := parseEtcdMetrics(strings.NewReader(etcdMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if s.Commands["txn"] != 12 || s.Commands["leasekeepalive"] != 3 || s.Commands.Total() != 15 {
		t.Errorf("commands %v, want txn 12, leasekeepalive 3", s.Commands)
	}
	if s.Writes != 1234 || s.Syncs != 77 || s.CPUSeconds != 1.5 {
		t.Errorf("writes %v syncs %v cpu %v, want 1234, 77, 1.5", s.Writes, s.Syncs, s.CPUSeconds)
	}
}

func FuzzParseEtcdMetrics(f *testing.F) {
	f.Add(etcdMetrics)
	f.Add("x{ 1\n}}} 2\ngrpc_server_msg_received_total{grpc_method=\" 1e400\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := parseEtcdMetrics(strings.NewReader(text))
		if err == nil && s.Commands == nil {
			t.Fatal("nil commands without an error")
		}
	})
}
