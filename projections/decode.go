package projections

import (
	"fmt"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/internal/decoded"
)

// decode turns a recorded event into its domain value; failure is ErrDecode, which stops the
// projector rather than letting it skip the event. The value is shared with the other
// consumers of this process (internal/decoded): it is read, never changed.
func decode(ev eventstore.RecordedEvent) (domain.Event, error) {
	e, err := decoded.Event(ev)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	return e, nil
}

// typesOf lists the stored type names of events, for a projector's filter.
func typesOf(events ...domain.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.EventType()
	}
	return out
}

// Page is the page/limit convention of every list (SPEC.md 4.9).
type Page struct {
	Page  int
	Limit int
}

// Offset is the number of rows before the page.
func (p Page) Offset() int { return (p.Page - 1) * p.Limit }

// TotalPages is how many pages of p.Limit hold total rows.
func (p Page) TotalPages(total int) int {
	if p.Limit <= 0 {
		return 0
	}
	return (total + p.Limit - 1) / p.Limit
}
