package artifact

import (
	"context"
	"log/slog"
	"time"

	"github.com/spillway-dev/spillway/artifact/token"
)

// Sweep deletes every artifact that expired before now, and every
// revocation past its expiry, and returns how many artifacts it deleted.
// Expiry is enforced on every read regardless; sweeping only reclaims
// space, and keeps expired revocations from counting against a bound.
// Both are kept for the signer's clock leeway (token.DefaultLeeway) past
// their expiry: a replica whose clock runs behind this one's by up to that
// still holds the artifact's links valid, and must neither find the
// artifact gone (404 for a good link) nor a revoked link's record gone
// (the link served again).
func (s *Service) Sweep(ctx context.Context) (int, error) {
	leeway := token.DefaultLeeway
	if s.Signer != nil {
		leeway = s.Signer.Leeway
	}
	before := s.now().Add(-leeway)
	n := 0
	start := time.Now()
	err := s.Store.ListExpired(ctx, before, func(id string) error {
		if err := s.delete(ctx, id); err != nil {
			return err
		}
		n++
		return nil
	})
	s.Metrics.storeOp("list_expired", start, err) // the deletes it drove included
	if err != nil {
		return n, err // the store is likely down: the next sweep does the rest
	}
	start = time.Now()
	_, err = s.Store.SweepRevocations(ctx, before)
	s.Metrics.storeOp("sweep_revocations", start, err)
	return n, err
}

// RunSweeper sweeps every interval until ctx is done.
func (s *Service) RunSweeper(ctx context.Context, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := s.Sweep(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("sweep failed", "deleted", n, "err", err)
		case n > 0:
			log.Info("swept expired artifacts", "deleted", n)
		}
	}
}
