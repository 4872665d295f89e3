package feed

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
)

// LockFunc runs fn while this process holds a reactor's lock (projections.HoldLock), so that
// one instance of several leads.
type LockFunc func(ctx context.Context, fn func(context.Context) error) error

// NoLock runs fn at once: the lock of a single process.
func NoLock(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) }

// Lead runs lead while holding lock until ctx ends. When lead or the lock fails it logs why and
// waits a second before taking the lock again, so a lost database connection does not spin.
func Lead(ctx context.Context, lock LockFunc, lead func(context.Context) error, log logrus.FieldLogger, name string) {
	for ctx.Err() == nil {
		if err := lock(ctx, lead); err != nil && ctx.Err() == nil {
			log.WithError(err).Warn(name + " interrupted; waiting for the lock again")
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}
