package console_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/commands"
)

// The workflow page lists its ON_EVENT triggers, and the debounce windows gathering events.
func TestWorkflowPageListsEventTriggersAndWindows(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	owner := s.client(t, s.owner)
	wf := s.workflow(t, `{"name": "Order batches", "components": [
		{"id": "paid", "module": "ON_EVENT", "config": {"name": "order.paid", "filter": "amount > 0",
			"debounce": {"key": "customer", "quietMs": 3600000}}, "position": [0, 0]},
		{"id": "book", "module": "core.echo", "position": [260, 0]}],
	  "edges": [{"from": "paid", "to": "book"}]}`).ID
	page := "/workspaces/" + s.ws + "/workflows/" + wf
	_, body := s.get(t, owner, page)
	if !strings.Contains(body, `data-event-trigger="paid"`) || !strings.Contains(body, `<code>order.paid</code>`) ||
		!strings.Contains(body, `<code>amount &gt; 0</code>`) || !strings.Contains(body, `by <code>customer</code>`) {
		t.Fatalf("the workflow page does not list the event trigger\n%s", body)
	}
	// The event index is a read model: an event sent before it has the workflow starts nothing.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m, err := s.env.Queries.EventTriggersOf(context.Background(), s.ws, "order.paid"); err == nil && len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the event index never listed the workflow's trigger")
		}
	}
	for i := range 2 {
		sent, err := s.env.Cmds.Events.SendEvent(context.Background(), commands.SendEvent{WorkspaceID: s.ws, Name: "order.paid",
			ID: "e" + string(rune('0'+i)), Payload: json.RawMessage(`{"amount": 5, "customer": "c1"}`), Triggers: s.env.Queries})
		if err != nil || len(sent.Runs) != 1 {
			t.Fatalf("event %d: %+v %v", i, sent, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body = s.get(t, owner, page)
		if strings.Contains(body, `data-window="paid"`) && strings.Contains(body, `<td data-label="Events" class="window-items">2</td>`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page shows no window gathering the two events\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
