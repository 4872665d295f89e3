package run

import (
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
)

// QueueCategory is the stream category of concurrency queues: runqueue-<id>, one per workflow
// and concurrency key (QueueID). A queue's stream is the one record of which runs of its key
// hold a slot and which wait, in trigger order: a run joins it in the same commit as its
// trigger, and slots are given by appends at the revision read, so two schedulers (a lead and
// one taking over) cannot both give the last slot.
const QueueCategory = "runqueue"

var queueNamespace = uuid.MustParse("3f5b8d0e-0c4a-4c6e-9d2b-7a1e5c9f4b30")

// QueueID is the queue of a workflow's runs whose concurrency key is key.
func QueueID(workflowID, key string) string {
	return uuid.NewSHA1(queueNamespace, []byte(workflowID+"\n"+key)).String()
}

// QueueJoined records a run waiting in its queue; it is appended with the run's Triggered.
type QueueJoined struct {
	QueueID    string `json:"queueId"`
	WorkflowID string `json:"workflowId"`
	Key        string `json:"key"`
	RunID      string `json:"runId"`
	// Limit is the definition's concurrency limit the run was triggered with: a queue takes
	// the limit of the run that joined last (a saved change applies to the runs after it).
	Limit int       `json:"limit"`
	At    time.Time `json:"at"`
}

// EventType names the event in the log.
func (QueueJoined) EventType() string { return "RunQueueJoined" }

// QueueAdmitted records runs given a slot, in queue order; each run's Admitted is appended in
// the same commit.
type QueueAdmitted struct {
	QueueID string    `json:"queueId"`
	RunIDs  []string  `json:"runIds"`
	At      time.Time `json:"at"`
}

// EventType names the event in the log.
func (QueueAdmitted) EventType() string { return "RunQueueAdmitted" }

// QueueLeft records runs that ended: those holding a slot free it, those waiting (cancelled
// or timed out before their turn) leave the line.
type QueueLeft struct {
	QueueID string    `json:"queueId"`
	RunIDs  []string  `json:"runIds"`
	At      time.Time `json:"at"`
}

// EventType names the event in the log.
func (QueueLeft) EventType() string { return "RunQueueLeft" }

func init() {
	domain.Events.Register(QueueJoined{}, QueueAdmitted{}, QueueLeft{})
}

// Queue is a concurrency queue folded from its stream. It is a value: Evolve copies what it
// changes.
type Queue struct {
	Exists     bool
	ID         string
	WorkflowID string
	Key        string
	Limit      int
	// Running holds the runs admitted that have not left, in admission order; Waiting the
	// runs that joined and were neither admitted nor left, in join (trigger) order.
	Running []string
	Waiting []string
}

// Evolve returns q with one event applied.
func (q Queue) Evolve(e domain.Event) Queue {
	switch ev := e.(type) {
	case QueueJoined:
		if slices.Contains(q.Waiting, ev.RunID) || slices.Contains(q.Running, ev.RunID) {
			return q
		}
		q.Exists, q.ID, q.WorkflowID, q.Key, q.Limit = true, ev.QueueID, ev.WorkflowID, ev.Key, ev.Limit
		q.Waiting = append(slices.Clip(q.Waiting), ev.RunID)
	case QueueAdmitted:
		for _, id := range ev.RunIDs {
			if i := slices.Index(q.Waiting, id); i >= 0 {
				q.Waiting = slices.Delete(slices.Clone(q.Waiting), i, i+1)
				q.Running = append(slices.Clip(q.Running), id)
			}
		}
	case QueueLeft:
		gone := func(id string) bool { return slices.Contains(ev.RunIDs, id) }
		q.Waiting = slices.DeleteFunc(slices.Clone(q.Waiting), gone)
		q.Running = slices.DeleteFunc(slices.Clone(q.Running), gone)
	}
	return q
}

// JoinQueue is the QueueJoined of a run triggered with a concurrency (t.Definition has one);
// ok is false for a run without.
func JoinQueue(t Triggered) (QueueJoined, bool) {
	c := t.Definition.Concurrency
	if c == nil {
		return QueueJoined{}, false
	}
	return QueueJoined{QueueID: QueueID(t.WorkflowID, t.ConcurrencyKey), WorkflowID: t.WorkflowID, Key: t.ConcurrencyKey,
		RunID: t.RunID, Limit: c.Limit, At: t.At}, true
}

// RejoinQueue is the QueueJoined of a waiting run whose join was lost (a store whose
// multi-stream append is not atomic wrote its trigger and not its join): it joins at the end
// of the line. ok is false for a run that does not wait.
func RejoinQueue(s State, now time.Time) (QueueJoined, bool) {
	if !s.Exists || !s.Waiting() {
		return QueueJoined{}, false
	}
	return QueueJoined{QueueID: s.QueueID, WorkflowID: s.WorkflowID, Key: s.ConcurrencyKey, RunID: s.ID,
		Limit: s.Definition.Concurrency.Limit, At: now.UTC()}, true
}

// DecideQueue frees the slots of the runs in left that ended (and takes those still waiting
// out of the line), then admits waiting runs in order while fewer than the limit hold a slot.
// It returns the queue's events and the runs admitted, each of which gets its Admitted in the
// same commit (DecideAdmit). A run admitted here that turns out to have ended is passed in
// left on the next call; the caller decides again before appending.
func DecideQueue(q Queue, left []string, now time.Time) ([]domain.Event, []string) {
	if !q.Exists {
		return nil, nil
	}
	var events []domain.Event
	var gone []string
	for _, id := range left {
		if (slices.Contains(q.Running, id) || slices.Contains(q.Waiting, id)) && !slices.Contains(gone, id) {
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		e := QueueLeft{QueueID: q.ID, RunIDs: gone, At: now.UTC()}
		q = q.Evolve(e)
		events = append(events, e)
	}
	free := q.Limit - len(q.Running)
	if free <= 0 || len(q.Waiting) == 0 {
		return events, nil
	}
	admit := slices.Clone(q.Waiting[:min(free, len(q.Waiting))])
	return append(events, QueueAdmitted{QueueID: q.ID, RunIDs: admit, At: now.UTC()}), admit
}

// DecideAdmit starts a run its queue admitted; a run that no longer waits (ended, or admitted
// already) gets nothing.
func DecideAdmit(s State, now time.Time) []domain.Event {
	if !s.Exists || !s.Waiting() {
		return nil
	}
	return []domain.Event{Admitted{RunID: s.ID, QueueID: s.QueueID, At: now.UTC()}}
}
