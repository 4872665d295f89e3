// Package schedules fires the ON_SCHEDULE components of workflows (docs/workflows.md,
// "Schedules"): it keeps one timer, armed for the nearest fire of any schedule, and when it
// rings asks commands.Schedules to decide the fires due and start their runs.
//
// One instance fires at a time (a PostgreSQL advisory lock); the others wait to take over.
// Everything it knows it derives from the log: on taking the lead it reads the workflow
// definitions from the log, then follows their changes, the pauses and resumes of schedules
// and the ends of runs (a queued fire waits for one) on the live feed. Each fire is decided
// once on its schedule's stream and starts the run whose id derives from the fire time, so a
// second instance firing meanwhile, or a restart, starts no run twice.
package schedules

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/schedule"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/reactors/feed"
)

// LockFunc runs fn while this process holds the schedules' lock (projections.HoldLock).
type LockFunc = feed.LockFunc

// Config configures a Reactor.
type Config struct {
	// Lock elects the one firing instance; nil (the default) fires without one, for a single
	// process. (Two instances firing at once still start each fire's run once: the lock only
	// saves the loser's work.)
	Lock LockFunc
	// Now is the clock fire times are compared with; default time.Now. It must be the clock
	// the commands were given (commands.WithClock): they decide what is due by theirs.
	Now func() time.Time
	// ClockMoved, when set, tells the reactor that Now jumped (a test's clock): it looks at
	// what is due at once instead of when its timer, armed by the wall clock, rings.
	ClockMoved <-chan struct{}
	// RetryInterval is how long after a failed decision a workflow's schedules are tried
	// again. Default 1s.
	RetryInterval time.Duration
	// ScanPage is how many definition events one read of the log takes on start. Default 500.
	ScanPage int
	// Concurrency bounds the workflows whose due fires are decided at once. Default 8.
	Concurrency int
	// Logger receives the reactor's warnings; default logrus.StandardLogger().
	Logger logrus.FieldLogger
}

func (c *Config) setDefaults() {
	if c.Lock == nil {
		c.Lock = feed.NoLock
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = time.Second
	}
	if c.ScanPage <= 0 {
		c.ScanPage = 500
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
}

// Validate reports the first field out of range, by name. Zero values take the default.
func (c Config) Validate() error {
	switch {
	case c.RetryInterval < 0:
		return fmt.Errorf("schedules: RetryInterval %v: must not be negative", c.RetryInterval)
	case c.ScanPage < 0:
		return fmt.Errorf("schedules: ScanPage %d: must be at least 1 (0 takes the default)", c.ScanPage)
	case c.Concurrency < 0:
		return fmt.Errorf("schedules: Concurrency %d: must be at least 1 (0 takes the default)", c.Concurrency)
	}
	return nil
}

// Reactor fires schedules.
type Reactor struct {
	store eventstore.Store
	cmds  *commands.Commands
	opts  Config
	log   logrus.FieldLogger
}

// New returns a reactor following store and issuing cmds' Schedules; Run starts it. It calls
// cfg.setDefaults, which repairs what Validate would refuse.
func New(store eventstore.Store, cmds *commands.Commands, cfg Config) *Reactor {
	cfg.setDefaults()
	return &Reactor{store: store, cmds: cmds, opts: cfg, log: cfg.Logger.WithField("component", "schedules")}
}

// Run fires while it holds the lock, waiting for it again if it loses it, until ctx ends.
func (r *Reactor) Run(ctx context.Context) error {
	feed.Lead(ctx, r.opts.Lock, r.lead, r.log, "schedules")
	return nil
}

var definitionTypes = []string{workflow.Created{}.EventType(), workflow.Updated{}.EventType(), workflow.Deleted{}.EventType()}

// filter selects what changes a schedule's plan: its definition, its pause and resume, and the
// end of a run a queued fire waits for.
var filter = eventstore.Filter{Types: append(append([]string{}, definitionTypes...),
	workflow.ComponentUpdated{}.EventType(), schedule.Paused{}.EventType(), schedule.Resumed{}.EventType(), run.Finished{}.EventType())}

// plans is the lead's view: what each workflow's schedules wait for.
type plans struct {
	// wake is when each workflow next has a fire to decide (the earliest of its schedules').
	wake map[string]time.Time
	// waits maps a run to the workflow whose queued fire waits for its end.
	waits map[string]string
}

// lead fires until ctx ends: the live feed first, then the workflows with schedules read
// from the log, so no definition written meanwhile is missed.
func (r *Reactor) lead(ctx context.Context) error {
	events, err := feed.Open(ctx, r.store, filter, r.log)
	if err != nil {
		return fmt.Errorf("schedules: %w", err)
	}
	ids, err := r.scan(ctx)
	if err != nil {
		return fmt.Errorf("schedules: %w", err)
	}
	r.log.WithField("workflows", len(ids)).Info("schedules running")
	p := plans{wake: map[string]time.Time{}, waits: map[string]string{}}
	r.advance(ctx, &p, ids, true)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		armed := r.arm(timer, p)
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			if id := r.workflowOf(ev, p); id != "" {
				r.advance(ctx, &p, []string{id}, false)
			}
		case <-armed:
			r.due(ctx, &p)
		case <-r.opts.ClockMoved:
			r.due(ctx, &p)
		}
	}
}

// arm sets timer for the nearest wake and returns its channel; nil when nothing is waited for.
func (r *Reactor) arm(timer *time.Timer, p plans) <-chan time.Time {
	var next time.Time
	for _, at := range p.wake {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if next.IsZero() {
		return nil
	}
	timer.Reset(max(next.Sub(r.opts.Now()), 0))
	return timer.C
}

// due advances every workflow with a fire due by now.
func (r *Reactor) due(ctx context.Context, p *plans) {
	now := r.opts.Now()
	var ids []string
	for id, at := range p.wake {
		if !at.After(now) {
			ids = append(ids, id)
		}
	}
	r.advance(ctx, p, ids, false)
}

// advance decides the due fires of the workflows ids, Concurrency at a time, and records what
// their schedules wait for next.
func (r *Reactor) advance(ctx context.Context, p *plans, ids []string, restart bool) {
	type result struct {
		plans []commands.SchedulePlan
		err   error
	}
	results := make([]result, len(ids))
	slots := make(chan struct{}, r.opts.Concurrency)
	var wg sync.WaitGroup
	for i, id := range ids {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			got, err := r.cmds.Schedules.AdvanceSchedules(ctx, id, restart)
			results[i] = result{got, err}
		}()
	}
	wg.Wait()
	for i, id := range ids {
		r.record(ctx, p, id, results[i].plans, results[i].err)
	}
}

// record keeps what workflow id's schedules wait for; a failed decision is tried again after
// RetryInterval.
func (r *Reactor) record(ctx context.Context, p *plans, id string, got []commands.SchedulePlan, err error) {
	delete(p.wake, id)
	for run, wf := range p.waits {
		if wf == id {
			delete(p.waits, run)
		}
	}
	for _, plan := range got {
		if !plan.Wake.IsZero() {
			if at, ok := p.wake[id]; !ok || plan.Wake.Before(at) {
				p.wake[id] = plan.Wake
			}
		}
		if plan.WaitRun != "" {
			p.waits[plan.WaitRun] = id
		}
	}
	if err != nil && ctx.Err() == nil {
		r.log.WithError(err).WithField("workflowId", id).Warn("schedule fire failed; trying again")
		p.wake[id] = r.opts.Now().Add(r.opts.RetryInterval)
	}
}

// workflowOf names the workflow whose schedules ev changes, "" when none.
func (r *Reactor) workflowOf(ev eventstore.RecordedEvent, p plans) string {
	id := strings.TrimPrefix(ev.Stream, ev.Category()+"-")
	switch ev.Category() {
	case workflow.Category:
		return id
	case schedule.Category:
		wf, _, _ := strings.Cut(id, ".")
		return wf
	case run.Category:
		return p.waits[id]
	}
	return ""
}

// scan reads the workflow definitions in the log up to its head and lists the live workflows
// with an ON_SCHEDULE component.
func (r *Reactor) scan(ctx context.Context) ([]string, error) {
	head, err := r.store.HeadPosition(ctx)
	if err != nil {
		return nil, err
	}
	has := map[string]bool{}
	from := eventstore.Start
	for from.Less(head) {
		page, err := r.store.ReadAll(ctx, from, r.opts.ScanPage, eventstore.Filter{Types: definitionTypes})
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		for _, ev := range page {
			from = ev.Position
			e, err := domain.Events.Decode(ev.Type, ev.Data)
			if err != nil {
				return nil, err
			}
			switch e := e.(type) {
			case workflow.Created:
				has[e.WorkflowID] = len(e.Definition.TriggersOf(workflow.ModuleOnSchedule)) > 0
			case workflow.Updated:
				has[e.WorkflowID] = len(e.Definition.TriggersOf(workflow.ModuleOnSchedule)) > 0
			case workflow.Deleted:
				delete(has, e.WorkflowID)
			}
		}
	}
	var ids []string
	for id, ok := range has {
		if ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
