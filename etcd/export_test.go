package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RevokeLease revokes id as a failed acquisition does.
func (b *Backend) RevokeLease(ctx context.Context, id clientv3.LeaseID) { b.revoke(ctx, id) }
