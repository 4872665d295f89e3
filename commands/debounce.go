package commands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/debounce"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/modules"
)

var debounceAgg = aggregate[debounce.State]{evolve: debounce.State.Evolve, clone: debounce.State.Clone}

// DebounceStream is the stream of window n of a debounced trigger's key (keyID: debounceKeyID).
func DebounceStream(keyID string, n int) string {
	return eventstore.StreamName(debounce.Category, keyID+"-"+strconv.Itoa(n))
}

// debounceKeyID names a key of a trigger component: hashed, as keys are payload values.
func debounceKeyID(workflowID, componentID, key string) string {
	sum := sha256.Sum256([]byte(workflowID + "\n" + componentID + "\n" + key))
	return hex.EncodeToString(sum[:16])
}

// windowHeads remembers, per key, the window this process last gathered into: where the next
// delivery of the key starts looking. Only a hint (windows only move on), so a stale one costs
// a read per window passed, and a process without one finds the head by probing (findHead).
var windowHeads = headHints{m: map[string]int{}}

// maxHeadHints bounds windowHeads; a full map starts over (the hints are found again).
const maxHeadHints = 100_000

type headHints struct {
	mu sync.Mutex
	m  map[string]int
}

func (h *headHints) get(keyID string) (int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.m[keyID]
	return n, ok
}

func (h *headHints) put(keyID string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.m) >= maxHeadHints {
		clear(h.m)
	}
	h.m[keyID] = n
}

// debounceOf is the debounce of trigger component id of d, nil when it has none.
func debounceOf(d workflow.Definition, id string) (*workflow.DebounceConfig, error) {
	for _, c := range d.Components {
		if c.ID == id {
			if c.Module != workflow.ModuleOnEvent && c.Module != workflow.ModuleOnWebhook {
				return nil, nil
			}
			return workflow.ParseDebounce(c.Config)
		}
	}
	return nil, fmt.Errorf("deliver: component %q: %w", id, domain.ErrNotFound)
}

// debounceKey is the key of payload under cfg: the key expression's value as JSON text. A key
// that fails to evaluate (say, a field missing from the payload indexed further) is null.
func debounceKey(ctx context.Context, cfg workflow.DebounceConfig, payload json.RawMessage) string {
	if cfg.Key == "" {
		return "null"
	}
	e, err := payloadExpressions.get(cfg.Key)
	if err != nil {
		return "null"
	}
	v, err := e.Eval(ctx, payload)
	if err != nil {
		return "null"
	}
	return string(v)
}

// clockSkew is how far the clocks of two instances may disagree: a delivery delivered again
// looks for itself in the windows last written up to this long before it was first received.
const clockSkew = time.Minute

// gather adds d to the open window of its key, going on to the next window past closed or
// full ones (a full one is flushed on the way), and starts the window's run when d fills it.
// A delivery delivered again (again: when it was first received) may sit in a window flushed
// since: the key's earlier windows are searched for it first, back to those last written
// before it was received.
func gather(ctx context.Context, w *Workflows, d Delivery, cfg workflow.DebounceConfig, again time.Time) (delivered, error) {
	key := debounceKey(ctx, cfg, d.Payload)
	keyID := debounceKeyID(d.WorkflowID, d.TriggerID, key)
	n, err := findHead(ctx, w, keyID)
	if err != nil {
		return delivered{}, err
	}
	if !again.IsZero() {
		if found, ok, err := findDelivery(ctx, w, keyID, n, d.ID, again.Add(-clockSkew)); err != nil || ok {
			return found, err
		}
	}
	for {
		stream := DebounceStream(keyID, n)
		b := debounce.Buffered{Window: debounce.Window{WorkspaceID: d.WorkspaceID, WorkflowID: d.WorkflowID, ComponentID: d.TriggerID,
			Key: key, N: n}, DeliveryID: d.ID, Payload: d.Payload}
		st, _, err := executeCached(ctx, w, stream, debounceAgg, func(s debounce.State) ([]domain.Event, error) {
			return debounce.DecideBuffer(s, b, cfg, w.now())
		})
		if errors.Is(err, debounce.ErrFull) {
			if _, err := flushWindow(ctx, w, stream, true); err != nil {
				return delivered{}, err
			}
		}
		if errors.Is(err, debounce.ErrClosed) || errors.Is(err, debounce.ErrFull) {
			n++
			continue
		}
		if err != nil {
			return delivered{}, wrap("debounce", err)
		}
		windowHeads.put(keyID, n)
		if len(st.Items) >= st.Config.MaxItems {
			return flushWindow(ctx, w, stream, true)
		}
		runID := DerivedRunID("debounce", stream)
		return delivered{TriggeredRun: TriggeredRun{RunID: runID, JobID: stageOf(runID, d.TriggerID)}, Debounced: true}, nil
	}
}

// findDelivery looks for delivery id in the windows of keyID before head, latest first, back
// to the first last written before since. A window found flushed is flushed again (its run
// started, if a crash stopped that).
func findDelivery(ctx context.Context, w *Workflows, keyID string, head int, id string, since time.Time) (delivered, bool, error) {
	for n := head - 1; n >= 0; n-- {
		stream := DebounceStream(keyID, n)
		l, err := load(ctx, w, stream, debounceAgg)
		if err != nil {
			return delivered{}, false, err
		}
		if l.state.Holds(id) {
			d, err := flushWindow(ctx, w, stream, true)
			return d, true, err
		}
		if l.state.LastAt.Before(since) {
			break
		}
	}
	return delivered{}, false, nil
}

// findHead is the first window of keyID not known closed: this process's hint, or the first
// unflushed window found by doubling then halving (windows 0..head-1 are all flushed).
func findHead(ctx context.Context, w *Workflows, keyID string) (int, error) {
	if n, ok := windowHeads.get(keyID); ok {
		return n, nil
	}
	closed := func(n int) (bool, error) {
		l, err := load(ctx, w, DebounceStream(keyID, n), debounceAgg)
		return l.state.Flushed, err
	}
	if c, err := closed(0); err != nil || !c {
		return 0, err
	}
	lo, hi := 0, 1 // lo closed; hi unknown
	for {
		c, err := closed(hi)
		if err != nil {
			return 0, err
		}
		if !c {
			break
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 { // lo closed, hi open or new
		mid := (lo + hi) / 2
		c, err := closed(mid)
		if err != nil {
			return 0, err
		}
		if c {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// flushWindow closes window stream once it is due (at once with force) and starts its run with
// the id derived from the window, then records the start: a start repeated after a crash, or
// by another instance, finds the same run. A window not due yet is left open (delivered has
// no RunID).
func flushWindow(ctx context.Context, w *Workflows, stream string, force bool) (delivered, error) {
	runID := DerivedRunID("debounce", stream)
	st, _, err := executeCached(ctx, w, stream, debounceAgg, func(s debounce.State) ([]domain.Event, error) {
		return debounce.DecideFlush(s, runID, w.now(), force)
	})
	if err != nil {
		return delivered{}, wrap("flush debounce", err)
	}
	if !st.Flushed {
		return delivered{}, nil
	}
	out := delivered{TriggeredRun: TriggeredRun{RunID: st.RunID, JobID: stageOf(st.RunID, st.ComponentID)}, Debounced: true, Started: true}
	if st.Started {
		return out, nil
	}
	startErr := ""
	_, _, err = startRun(ctx, w, StartRun{WorkspaceID: st.WorkspaceID, WorkflowID: st.WorkflowID, TriggerID: st.ComponentID,
		RunID: st.RunID, Input: st.Body()})
	switch {
	case err == nil:
	case errors.Is(err, domain.ErrNotFound), errors.Is(err, domain.ErrInvalid), errors.Is(err, domain.ErrInsufficientCredits):
		// Sending the window again cannot help: recorded, and the window is done.
		startErr, out.Started = err.Error(), false
	default:
		return delivered{}, wrap("start debounced run", err) // the reactor tries again
	}
	_, _, err = executeCached(ctx, w, stream, debounceAgg, func(s debounce.State) ([]domain.Event, error) {
		return debounce.DecideStarted(s, startErr, w.now())
	})
	return out, wrap("record debounced run", err)
}

// stageOf is the id of a run's trigger stage.
func stageOf(runID, triggerID string) string { return run.StageID(runID, triggerID, run.NoIteration) }

// checkPayloadFilter compiles a trigger's filter; the message says what does not compile.
func checkPayloadFilter(src string) error { return payloadCheck(src, true) }

// checkPayloadValue compiles a debounce's key expression.
func checkPayloadValue(src string) error { return payloadCheck(src, false) }

func payloadCheck(src string, asBool bool) error {
	get := payloadExpressions.get
	if asBool {
		get = payloadExpressions.getFilter
	}
	_, err := get(src)
	var ve *modules.ValidationError
	if errors.As(err, &ve) {
		return errors.New(ve.Message)
	}
	return err
}
