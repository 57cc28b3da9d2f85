package artifact

import (
	"context"
	"log/slog"
	"time"
)

// Sweep deletes every artifact that expired before now, and every
// revocation past its expiry, and returns how many artifacts it deleted.
// Expiry is enforced on every read regardless; sweeping only reclaims
// space, and keeps expired revocations from counting against a bound.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	n := 0
	err := s.Store.ListExpired(ctx, s.now(), func(id string) error {
		if err := s.delete(ctx, id); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		return n, err // the store is likely down: the next sweep does the rest
	}
	_, err = s.Store.SweepRevocations(ctx, s.now())
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
