package projections

import (
	"context"
	"errors"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/switchyard/switchyard/eventstore"
)

// A Watermill message carries a batch of consecutive events, so a projector applies many events
// and its checkpoint in one transaction. Subscriber and handler are in one process, so the batch
// rides in the message's context as it is: encoding it into the payload only to decode it again
// cost a JSON round trip of every event for every projector.
type batchKey struct{}

// withBatch returns a message carrying events.
func withBatch(ctx context.Context, id string, events []eventstore.RecordedEvent) *message.Message {
	msg := message.NewMessage(id, nil)
	msg.SetContext(context.WithValue(ctx, batchKey{}, events))
	return msg
}

// errNoBatch is a message that did not come from the projections' subscriber.
var errNoBatch = errors.New("projection message carries no batch of events")

// batchOf is the batch msg carries.
func batchOf(msg *message.Message) ([]eventstore.RecordedEvent, error) {
	events, ok := msg.Context().Value(batchKey{}).([]eventstore.RecordedEvent)
	if !ok {
		return nil, errNoBatch
	}
	return events, nil
}
