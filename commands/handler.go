// Package commands carries out Switchyard's commands: each handler loads an aggregate from its
// stream, asks the domain to decide, and appends the resulting events at the revision it read.
// Nothing else writes state.
package commands

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
	"github.com/switchyard/switchyard/seal"
)

// maxConflictRetries bounds how often a command reloads and decides again after another writer
// appended to the same stream first.
const maxConflictRetries = 20

// Handler carries out commands against one event store.
type Handler struct {
	store eventstore.Store
	now   func() time.Time
	cache *stateCache
	// balances remembers recent balances for the advisory check of a submit.
	balances sync.Map
	// balanceReads lets one read of a workspace's account serve every submit whose balance
	// expired at the same moment (checkBalance).
	balanceReads singleflight.Group
	// modules validates workflow components and submits and prices their runs.
	modules *modules.Registry
	// sealer seals the callback secrets of submits.
	sealer *seal.Sealer
	// runner is this process's executor, when it runs one (SetRunner).
	runner atomic.Pointer[runnerBox]
	// contended remembers when another process last moved an account stream under this
	// one's batch (stream name to time), for ChargeAndFinish to take turns (contention.go).
	contended sync.Map
}

// Option configures a Handler.
type Option func(*Handler)

// WithClock replaces the wall clock, for tests.
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// WithModules sets the module registry workflow definitions are checked against (default:
// the built-ins with their default options).
func WithModules(r *modules.Registry) Option { return func(h *Handler) { h.modules = r } }

// WithSealer sets the sealer callback secrets are sealed with before they enter an event;
// without one, a submit with a callback secret or headers is refused.
func WithSealer(s *seal.Sealer) Option { return func(h *Handler) { h.sealer = s } }

// New returns a Handler appending to store.
func New(store eventstore.Store, opts ...Option) *Handler {
	h := &Handler{store: store, now: time.Now, cache: newStateCache(4096)}
	for _, o := range opts {
		o(h)
	}
	if h.modules == nil {
		h.modules = modules.Builtins(modules.BuiltinsConfig{})
	}
	return h
}

// Store is the event store the handler writes to.
func (h *Handler) Store() eventstore.Store { return h.store }

// Now is the handler's clock.
func (h *Handler) Now() time.Time { return h.now() }

// Result tells where a command's events landed.
type Result struct {
	Stream   string
	Revision uint64
	Position eventstore.Position
	// Appended is false when the decision produced no events (nothing to do).
	Appended bool
}

func isConflict(err error) bool { return errors.Is(err, eventstore.ErrWrongExpectedVersion) }

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}
