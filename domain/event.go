// Package domain holds Switchyard's aggregates: their events, their state folded from those
// events, and the decisions that turn a command into new events. It is pure: no I/O, no clock
// (time is passed in), no logging.
package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
)

// Event is a fact recorded in a stream. EventType is the stable name stored with it.
type Event interface {
	EventType() string
}

// ErrUnknownEventType is returned when decoding a type no aggregate registered.
var ErrUnknownEventType = errors.New("unknown event type")

// Registry maps stored event type names to Go types, for decoding.
type Registry struct {
	mu    sync.RWMutex
	types map[string]reflect.Type
}

// Events is the registry every aggregate package registers its events in.
var Events = &Registry{types: map[string]reflect.Type{}}

// Register adds event types; each argument is a zero value of a struct event type.
func (r *Registry) Register(events ...Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range events {
		t := reflect.TypeOf(e)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if prev, ok := r.types[e.EventType()]; ok && prev != t {
			panic(fmt.Sprintf("domain: event type %q registered twice", e.EventType()))
		}
		r.types[e.EventType()] = t
	}
}

// Decode turns stored data into the registered event value of that type.
func (r *Registry) Decode(eventType string, data []byte) (Event, error) {
	r.mu.RLock()
	t, ok := r.types[eventType]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("decode %s: %w", eventType, ErrUnknownEventType)
	}
	v := reflect.New(t)
	if err := json.Unmarshal(data, v.Interface()); err != nil {
		return nil, fmt.Errorf("decode %s: %w", eventType, err)
	}
	return v.Elem().Interface().(Event), nil
}

// Types lists the registered type names, sorted.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.types))
	for name := range r.types {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Encode renders an event as the JSON stored in the log.
func Encode(e Event) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", e.EventType(), err)
	}
	return b, nil
}

// Identified is implemented by events whose ID must be derived from their cause, so that a
// retried command appends the same event ID and the store's idempotent append absorbs it.
type Identified interface {
	Event
	IdempotencyKey() string
}
