package workflow

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/switchyard/switchyard/domain"
)

// The overlap policies of a schedule: what a fire does while the run its schedule started
// last is still running.
const (
	// OverlapSkip drops the fire (the default).
	OverlapSkip = "skip"
	// OverlapAllow starts the fire's run beside the running one.
	OverlapAllow = "allow"
	// OverlapQueueOne keeps the fire pending (at most one) and starts it when the running run
	// ends; further fires meanwhile are dropped.
	OverlapQueueOne = "queue_one"
	// OverlapCancelPrevious cancels the running run and starts the fire's.
	OverlapCancelPrevious = "cancel_previous"
)

// Bounds of a schedule's config.
const (
	// MinEvery is the shortest interval of an "every" schedule.
	MinEvery = time.Second
	// MaxCatchUp bounds catchUp: a week of missed fires at most.
	MaxCatchUp = 7 * 24 * time.Hour
	// MaxJitterMs bounds jitterMs (an hour).
	MaxJitterMs = 3_600_000
	// LateGrace is how late a fire may be and still count as on time, not missed: a fire due
	// while the lead changed hands still runs without a catchUp.
	LateGrace = 10 * time.Second
	// maxCivilSteps bounds the wall-clock times one Next looks at (a seconds cron walking
	// through a repeated hour looks at 3600).
	maxCivilSteps = 100_000
)

// ScheduleConfig is the config of an ON_SCHEDULE component. Exactly one of Cron and Every is
// set.
type ScheduleConfig struct {
	// Cron is five fields (minute hour day-of-month month day-of-week) or six with seconds
	// first, read in Timezone.
	Cron string `json:"cron,omitempty"`
	// Every is an interval of at least 1 s (Go duration syntax: "30s", "5m"); fires fall on
	// its multiples since the Unix epoch, so every instance agrees on them.
	Every string `json:"every,omitempty"`
	// Timezone is the IANA zone Cron is read in; default UTC.
	Timezone string `json:"timezone,omitempty"`
	// Overlap is the overlap policy (OverlapSkip and kin); default OverlapSkip.
	Overlap string `json:"overlap,omitempty"`
	// CatchUp is how far back fires missed while no instance ran are still run (each once);
	// default none (only fires late by less than LateGrace run).
	CatchUp string `json:"catchUp,omitempty"`
	// JitterMs delays each fire by up to this many milliseconds, the same delay on every
	// instance (derived from the schedule and the fire time).
	JitterMs int64 `json:"jitterMs,omitempty"`
	// Input is the trigger body of the runs the schedule starts: an object; default {}.
	Input json.RawMessage `json:"input,omitempty"`
}

// Schedule is a parsed ScheduleConfig: what fires when.
type Schedule struct {
	ScheduleConfig
	spec     *cron.SpecSchedule // in UTC: it walks wall-clock times, loc places them
	every    time.Duration
	loc      *time.Location
	catchUp  time.Duration
	overlapP string
}

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// checkScheduleConfig checks an ON_SCHEDULE component's config.
func checkScheduleConfig(config json.RawMessage) error {
	_, err := ParseSchedule(config)
	return err
}

// ParseSchedule reads and checks an ON_SCHEDULE config; errors name the field
// (config.cron, config.every, ...).
func ParseSchedule(config json.RawMessage) (Schedule, error) {
	var s Schedule
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s.ScheduleConfig); err != nil {
		return s, domain.Invalid("config", `must be {"cron": "0 9 * * MON-FRI"} or {"every": "30s"}, with optional "timezone", "overlap", "catchUp", "jitterMs", "input": %v`, err)
	}
	c := &s.ScheduleConfig
	switch {
	case c.Cron == "" && c.Every == "":
		return s, domain.Invalid("config.cron", `is required (or config.every): a cron like "0 9 * * MON-FRI" or an interval like "30s"`)
	case c.Cron != "" && c.Every != "":
		return s, domain.Invalid("config.every", "cannot be given with config.cron: give one of them")
	}
	if err := s.parseWhen(); err != nil {
		return s, err
	}
	if err := s.parseRest(); err != nil {
		return s, err
	}
	return s, nil
}

func (s *Schedule) parseWhen() error {
	c := &s.ScheduleConfig
	s.loc = time.UTC
	if c.Timezone != "" {
		loc, err := time.LoadLocation(c.Timezone)
		if err != nil || c.Timezone == "Local" {
			return domain.Invalid("config.timezone", "must be an IANA time zone such as Europe/Berlin")
		}
		s.loc = loc
	}
	if c.Every != "" {
		d, err := time.ParseDuration(c.Every)
		if err != nil || d < MinEvery {
			return domain.Invalid("config.every", "must be a duration of at least 1s, like \"30s\" or \"5m\"")
		}
		if c.Timezone != "" {
			return domain.Invalid("config.timezone", "applies to config.cron only: an interval is the same in every zone")
		}
		s.every = d
		return nil
	}
	spec := strings.TrimSpace(c.Cron)
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "@every") {
		return domain.Invalid("config.cron", "must be cron fields: give the zone in config.timezone and an interval in config.every")
	}
	if n := len(strings.Fields(spec)); !strings.HasPrefix(spec, "@") && n != 5 && n != 6 {
		return domain.Invalid("config.cron", "must have five fields (minute hour day month weekday) or six with seconds first; it has %d", n)
	}
	parsed, err := cronParser.Parse(spec)
	if err != nil {
		return domain.Invalid("config.cron", "%v", err)
	}
	ss, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return domain.Invalid("config.cron", "must be cron fields")
	}
	ss.Location = time.UTC
	s.spec = ss
	if s.spec.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return domain.Invalid("config.cron", "never fires")
	}
	return nil
}

func (s *Schedule) parseRest() error {
	c := &s.ScheduleConfig
	switch c.Overlap {
	case "":
		s.overlapP = OverlapSkip
	case OverlapSkip, OverlapAllow, OverlapQueueOne, OverlapCancelPrevious:
		s.overlapP = c.Overlap
	default:
		return domain.Invalid("config.overlap", "must be %q, %q, %q or %q", OverlapSkip, OverlapAllow, OverlapQueueOne, OverlapCancelPrevious)
	}
	if c.CatchUp != "" {
		d, err := time.ParseDuration(c.CatchUp)
		if err != nil || d < 0 || d > MaxCatchUp {
			return domain.Invalid("config.catchUp", "must be a duration from 0s to %s, like \"1h\"", MaxCatchUp)
		}
		s.catchUp = d
	}
	if c.JitterMs < 0 || c.JitterMs > MaxJitterMs {
		return domain.Invalid("config.jitterMs", "must be from 0 to %d", MaxJitterMs)
	}
	if len(c.Input) > 0 && string(c.Input) != "null" && !isObject(c.Input) {
		return domain.Invalid("config.input", "must be a JSON object: the trigger body of the runs")
	}
	return nil
}

// Overlap is the overlap policy, its default filled in.
func (s Schedule) Overlap() string { return s.overlapP }

// Body is the trigger body of the schedule's runs: config.input, or {}.
func (s Schedule) Body() json.RawMessage {
	if len(s.Input) == 0 || string(s.Input) == "null" {
		return json.RawMessage(`{}`)
	}
	return s.Input
}

// Window is how far back a fire not yet run may lie and still run: catchUp, and at least
// LateGrace.
func (s Schedule) Window() time.Duration { return max(s.catchUp, LateGrace) }

// Next is the first fire time strictly after t, zero when there is none. Cron times are
// wall-clock times in the schedule's zone: one skipped by a spring-forward fires at the
// instant the gap ends, one repeated by a fall-back fires at its first occurrence only.
func (s Schedule) Next(t time.Time) time.Time {
	if s.every > 0 {
		d := int64(s.every)
		n := t.UnixNano()
		next := (n/d)*d + d
		if n < 0 && n%d != 0 {
			next -= d
		}
		return time.Unix(0, next).UTC()
	}
	civil := wall(t.In(s.loc))
	for range maxCivilSteps {
		civil = s.spec.Next(civil)
		if civil.IsZero() {
			return time.Time{}
		}
		if at := instant(civil, s.loc); at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// FireTimes lists the first n fire times strictly after t.
func (s Schedule) FireTimes(t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for len(out) < n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// Due lists the fire times after since up to now (inclusive) that are still to run: those
// less than Window before now whose jitter has passed, oldest first, at most limit.
func (s Schedule) Due(key string, since, now time.Time, limit int) []time.Time {
	if floor := now.Add(-s.Window()); since.Before(floor) {
		since = floor
	}
	var due []time.Time
	for t := s.Next(since); !t.IsZero() && len(due) < limit; t = s.Next(t) {
		if t.Add(s.Jitter(key, t)).After(now) {
			break
		}
		due = append(due, t)
	}
	return due
}

// Jitter is the delay of the fire at t of the schedule named key: below jitterMs, the same on
// every instance.
func (s Schedule) Jitter(key string, t time.Time) time.Duration {
	if s.JitterMs <= 0 {
		return 0
	}
	sum := sha256.Sum256([]byte(key + "\n" + t.UTC().Format(time.RFC3339Nano)))
	return time.Duration(binary.BigEndian.Uint64(sum[:8])%uint64(s.JitterMs)) * time.Millisecond
}

// wall is t's wall-clock reading as a UTC time, the frame the cron spec walks in.
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

// instant places the wall-clock time civil in loc: its first occurrence when a fall-back
// repeats it, the end of the gap when a spring-forward skips it.
func instant(civil time.Time, loc *time.Location) time.Time {
	_, before := civil.Add(-48 * time.Hour).In(loc).Zone()
	_, after := civil.Add(48 * time.Hour).In(loc).Zone()
	var found time.Time
	for _, off := range []int{before, after} {
		at := civil.Add(-time.Duration(off) * time.Second)
		if wall(at.In(loc)).Equal(civil) && (found.IsZero() || at.Before(found)) {
			found = at
		}
	}
	if !found.IsZero() {
		return found.UTC()
	}
	// In a gap: read with the offset before it, civil lands past the gap's end, in the zone
	// that begins there.
	start, _ := civil.Add(-time.Duration(before) * time.Second).In(loc).ZoneBounds()
	return start.UTC()
}
