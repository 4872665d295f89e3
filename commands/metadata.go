package commands

import (
	"context"
	"encoding/json"
)

// Metadata travels with every event: who caused it and through which request.
type Metadata struct {
	Actor     string `json:"actor,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	Source    string `json:"source,omitempty"`
}

type metadataKey struct{}

// WithMetadata attaches metadata to the events appended under ctx.
func WithMetadata(ctx context.Context, m Metadata) context.Context {
	return context.WithValue(ctx, metadataKey{}, m)
}

func metadataFrom(ctx context.Context) []byte {
	m := MetadataFrom(ctx)
	if m == (Metadata{}) {
		return nil
	}
	b, _ := json.Marshal(m)
	return b
}

// MetadataFrom is the metadata ctx carries (WithMetadata), zero when none.
func MetadataFrom(ctx context.Context) Metadata {
	m, _ := ctx.Value(metadataKey{}).(Metadata)
	return m
}
