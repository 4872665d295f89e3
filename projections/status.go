package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/eventstore"
)

// maxLagCount bounds how many pending events Status counts per projector.
const maxLagCount = 1_000_000

// Status is a projector's position and how far behind the log it is.
type Status struct {
	Name          string              `json:"name"`
	Position      eventstore.Position `json:"-"`
	PositionText  string              `json:"position"`
	EventsApplied int64               `json:"eventsApplied"`
	// Lag counts the log's events for this projector not applied yet (capped; LagCapped says so).
	Lag         int64      `json:"lag"`
	LagCapped   bool       `json:"lagCapped,omitempty"`
	LastEventAt *time.Time `json:"lastEventAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	Error       string     `json:"error,omitempty"`
}

// Status reports every projector's checkpoint and lag.
func (e *Engine) Status(ctx context.Context) ([]Status, error) {
	out := make([]Status, 0, len(e.order))
	for _, p := range e.order {
		cp, err := readCheckpoint(ctx, e.pool, p.Name())
		if err != nil {
			return nil, err
		}
		lag, capped, err := e.countAfter(ctx, cp.Position, p.Filter())
		if err != nil {
			return nil, fmt.Errorf("lag of %s: %w", p.Name(), err)
		}
		out = append(out, Status{Name: p.Name(), Position: cp.Position, PositionText: cp.Position.String(),
			EventsApplied: cp.EventsApplied, Lag: lag, LagCapped: capped, LastEventAt: cp.LastEventAt,
			UpdatedAt: cp.UpdatedAt, Error: cp.Error})
	}
	return out, nil
}

func (e *Engine) countAfter(ctx context.Context, pos eventstore.Position, f eventstore.Filter) (int64, bool, error) {
	var n int64
	for n < maxLagCount {
		events, err := e.store.ReadAll(ctx, pos, 5000, f)
		if err != nil {
			return 0, false, err
		}
		n += int64(len(events))
		if len(events) < 5000 {
			return n, false, nil
		}
		pos = events[len(events)-1].Position
	}
	return n, true, nil
}
