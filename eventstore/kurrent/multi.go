package kurrent

import (
	"context"
	"fmt"

	"github.com/switchyard/switchyard/eventstore"
)

// AppendMulti appends the parts one after another, in the order given, stopping at the first
// failure. It is not atomic: the v4 Go client (and the gRPC Streams API it speaks) has no
// multi-stream append, so parts before a failing one stay written. Retrying the whole call
// with the same event IDs is safe: the parts already written are recognized as idempotent
// repeats (docs/kurrentdb.md).
func (s *Store) AppendMulti(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	for _, a := range appends {
		if err := validateAppend(a.Stream, a.Events); err != nil {
			return nil, err
		}
		if len(a.Claims) > 0 {
			// The server has nowhere to keep a claim in the same commit; callers claim first
			// (eventstore.ClaimStore, which this store is not).
			return nil, fmt.Errorf("kurrent: append multi to %s: %w", a.Stream, eventstore.ErrClaimsUnsupported)
		}
	}
	res := make([]eventstore.AppendResult, 0, len(appends))
	for i, a := range appends {
		r, err := s.Append(ctx, a.Stream, a.Expected, a.Events...)
		if err != nil {
			if i == 0 {
				return nil, err
			}
			return nil, fmt.Errorf("kurrent: append multi: part %d of %d (%d written before it): %w", i+1, len(appends), i, err)
		}
		res = append(res, r)
	}
	return res, nil
}
