package s3store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

// gate bounds the uploads that hold a part buffer at once, in the process
// and per tenant: each Put holds up to PartSize bytes, and without a bound
// any caller able to upload (one tenant, or many agents' offloads) decides
// how much memory the process takes. Safe for concurrent use.
type gate struct {
	max, perTenant int
	wait           time.Duration

	mu      sync.Mutex
	total   int
	tenants map[string]int // tenant → uploads in flight; absent when 0
	freed   chan struct{}  // closed and replaced whenever a slot frees
}

func newGate(max, perTenant int, wait time.Duration) *gate {
	return &gate{max: max, perTenant: perTenant, wait: wait, tenants: map[string]int{}, freed: make(chan struct{})}
}

// enter takes a slot for tenant, waiting up to g.wait for one to free. It
// returns artifact.ErrBusy when none frees in time, and ctx's error when
// ctx ends first. Call the returned function once the upload is over.
func (g *gate) enter(ctx context.Context, tenant string) (leave func(), err error) {
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	for {
		g.mu.Lock()
		if g.total < g.max && g.tenants[tenant] < g.perTenant {
			g.total++
			g.tenants[tenant]++
			g.mu.Unlock()
			return func() { g.leave(tenant) }, nil
		}
		freed, tenantFull := g.freed, g.tenants[tenant] >= g.perTenant
		g.mu.Unlock()
		select {
		case <-freed:
		case <-timer.C:
			if tenantFull {
				return nil, fmt.Errorf("%d uploads of this tenant in flight: %w", g.perTenant, artifact.ErrBusy)
			}
			return nil, fmt.Errorf("%d uploads in flight: %w", g.max, artifact.ErrBusy)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (g *gate) leave(tenant string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if g.tenants[tenant]--; g.tenants[tenant] == 0 {
		delete(g.tenants, tenant)
	}
	close(g.freed)
	g.freed = make(chan struct{})
}
