package projections

import (
	"encoding/json"
	"fmt"

	"github.com/switchyard/switchyard/eventstore"
)

// A Watermill message carries a batch of consecutive events, so a projector applies many events
// and its checkpoint in one transaction.
func encodeBatch(events []eventstore.RecordedEvent) ([]byte, error) {
	b, err := json.Marshal(events)
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	return b, nil
}

func decodeBatch(payload []byte) ([]eventstore.RecordedEvent, error) {
	var events []eventstore.RecordedEvent
	if err := json.Unmarshal(payload, &events); err != nil {
		return nil, fmt.Errorf("decode batch: %w", err)
	}
	return events, nil
}
