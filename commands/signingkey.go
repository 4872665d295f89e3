package commands

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/signingkey"
	"github.com/switchyard/switchyard/eventstore"
)

var signingKeyAgg = aggregate[signingkey.State]{evolve: signingkey.State.Evolve}

// SigningKeyStream is the stream of a token signing key.
func SigningKeyStream(kid string) string { return eventstore.StreamName(signingkey.Category, kid) }

// CreateSigningKey records a key generated and sealed by the caller (key generation is the
// identity package's business; this only records it).
func (h *Identity) CreateSigningKey(ctx context.Context, k signingkey.Created) (Result, error) {
	res, err := execute(ctx, h, SigningKeyStream(k.KID), signingKeyAgg, func(s signingkey.State) ([]domain.Event, error) {
		return signingkey.DecideCreate(s, k, h.now())
	})
	return res, wrap("create signing key", err)
}

// SigningKey folds the key with kid from the event store.
func (h *Identity) SigningKey(ctx context.Context, kid string) (signingkey.Created, error) {
	k, err := load(ctx, h, SigningKeyStream(kid), signingKeyAgg)
	if err != nil {
		return signingkey.Created{}, err
	}
	if !k.state.Exists {
		return signingkey.Created{}, fmt.Errorf("signing key %s: %w", kid, domain.ErrNotFound)
	}
	return k.state.Key, nil
}

// signingKeysBatch is how many key events one read of the log returns.
const signingKeysBatch = 1000

// SigningKeys reads every signing key ever created from the event log, oldest first, rather
// than from the read model: for commands that run without the projections (the CLI) and for a
// first start.
func (h *Identity) SigningKeys(ctx context.Context) ([]signingkey.Created, error) {
	var keys []signingkey.Created
	from := eventstore.Start
	filter := eventstore.Filter{Types: []string{signingkey.Created{}.EventType()}}
	for {
		evs, err := h.store.ReadAll(ctx, from, signingKeysBatch, filter)
		if err != nil {
			return nil, fmt.Errorf("read signing keys: %w", err)
		}
		for _, ev := range evs {
			var c signingkey.Created
			if err := json.Unmarshal(ev.Data, &c); err != nil {
				return nil, fmt.Errorf("decode signing key at %v: %w", ev.Position, err)
			}
			keys = append(keys, c)
		}
		if len(evs) < signingKeysBatch {
			return keys, nil
		}
		from = evs[len(evs)-1].Position
	}
}
