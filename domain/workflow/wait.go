package workflow

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain"
)

// The kinds of wait a WAIT component holds its stage for (WaitConfig.Kind).
const (
	WaitFor      = "for"
	WaitUntil    = "until"
	WaitSignal   = "signal"
	WaitApproval = "approval"
)

// What a signal or approval wait does when its timeout passes.
const (
	OnTimeoutFail     = "fail"
	OnTimeoutContinue = "continue"
)

// The bounds of a wait's duration and of its timeouts.
const (
	MinWait = time.Second
	MaxWait = 365 * 24 * time.Hour
	// MaxSignalName bounds a signal's name, in the config and in a signal.
	MaxSignalName = 200
	// MaxQuestion bounds an approval's question.
	MaxQuestion = 2000
)

// WaitConfig is a WAIT component's config: exactly one of For, Until, Signal and Approval.
type WaitConfig struct {
	// For is how long to wait: a Go duration ("90m", "1h30m") or whole days ("7d"), 1 s to
	// 365 days.
	For string `json:"for,omitempty"`
	// Until is an expression (expr.eval's language) over the stage's input that gives the RFC
	// 3339 time to wait until: the input's top-level fields are variables, the whole input is
	// `payload`. A time already past completes the stage at once.
	Until string `json:"until,omitempty"`
	// Signal waits for POST .../executions/{runId}/signals with its name.
	Signal *SignalWait `json:"signal,omitempty"`
	// Approval waits for a person's decision, from the console or the stage's approvalUrl.
	Approval *ApprovalWait `json:"approval,omitempty"`
}

// SignalWait is a wait for a named signal.
type SignalWait struct {
	// Name is the signal's name (1 to 200 characters).
	Name string `json:"name"`
	// Timeout, when set, ends the wait after that long (as For); empty waits for ever (until
	// the run's own timeoutMs).
	Timeout string `json:"timeout,omitempty"`
	// OnTimeout is "fail" (default: the stage fails with wait_timeout) or "continue" (the stage
	// completes with {"timedOut": true}).
	OnTimeout string `json:"onTimeout,omitempty"`
}

// ApprovalWait is a wait for a person's approval.
type ApprovalWait struct {
	// Question is what the approval page asks; default the component's name.
	Question string `json:"question,omitempty"`
	// Timeout and OnTimeout are as a SignalWait's; "continue" completes the stage with
	// {"approved": false, "timedOut": true}.
	Timeout   string `json:"timeout,omitempty"`
	OnTimeout string `json:"onTimeout,omitempty"`
}

// Kind names which wait the config holds.
func (c WaitConfig) Kind() string {
	switch {
	case c.For != "":
		return WaitFor
	case c.Until != "":
		return WaitUntil
	case c.Signal != nil:
		return WaitSignal
	default:
		return WaitApproval
	}
}

// Timeout is the timeout of a signal or approval wait (zero when none), and what happens then.
func (c WaitConfig) Timeout() (time.Duration, string) {
	var t, on string
	switch {
	case c.Signal != nil:
		t, on = c.Signal.Timeout, c.Signal.OnTimeout
	case c.Approval != nil:
		t, on = c.Approval.Timeout, c.Approval.OnTimeout
	default:
		return 0, ""
	}
	if on == "" {
		on = OnTimeoutFail
	}
	if t == "" {
		return 0, on
	}
	d, _ := ParseWaitDuration(t)
	return d, on
}

// Duration is how long a "for" wait lasts.
func (c WaitConfig) Duration() time.Duration {
	d, _ := ParseWaitDuration(c.For)
	return d
}

// ParseWaitDuration reads a wait's duration: a Go duration or whole days ("7d").
func ParseWaitDuration(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a duration (\"90s\", \"90m\", \"36h\" or whole days \"7d\")", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration (\"90s\", \"90m\", \"36h\" or whole days \"7d\")", s)
		}
	}
	if d < MinWait || d > MaxWait {
		return 0, fmt.Errorf("%q must be between 1s and 365 days", s)
	}
	return d, nil
}

// ParseWait reads and checks a WAIT config; errors name the field ("config.signal.name").
func ParseWait(config json.RawMessage) (WaitConfig, error) {
	var wc WaitConfig
	dec := json.NewDecoder(strings.NewReader(string(config)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wc); err != nil {
		return wc, domain.Invalid("config", `must be one of {"for": "90m"}, {"until": expression}, {"signal": {"name": ...}} or {"approval": {...}}: %v`, err)
	}
	set := 0
	for _, on := range []bool{wc.For != "", wc.Until != "", wc.Signal != nil, wc.Approval != nil} {
		if on {
			set++
		}
	}
	if set != 1 {
		return wc, domain.Invalid("config", `must hold exactly one of "for", "until", "signal" and "approval"`)
	}
	switch {
	case wc.For != "":
		if _, err := ParseWaitDuration(wc.For); err != nil {
			return wc, domain.Invalid("config.for", "%s", err)
		}
	case wc.Until != "":
		if strings.TrimSpace(wc.Until) == "" || len(wc.Until) > MaxWhenLength {
			return wc, domain.Invalid("config.until", "must be an expression of at most %d characters giving an RFC 3339 time", MaxWhenLength)
		}
		if err := domain.CheckStorableString("config.until", wc.Until); err != nil {
			return wc, err
		}
	case wc.Signal != nil:
		n := wc.Signal.Name
		if strings.TrimSpace(n) == "" || len(n) > MaxSignalName {
			return wc, domain.Invalid("config.signal.name", "is required: 1 to %d characters", MaxSignalName)
		}
		if err := domain.CheckStorableString("config.signal.name", n); err != nil {
			return wc, err
		}
		if err := checkTimeout("config.signal", wc.Signal.Timeout, wc.Signal.OnTimeout); err != nil {
			return wc, err
		}
	default:
		if len(wc.Approval.Question) > MaxQuestion {
			return wc, domain.Invalid("config.approval.question", "must be at most %d characters", MaxQuestion)
		}
		if err := domain.CheckStorableString("config.approval.question", wc.Approval.Question); err != nil {
			return wc, err
		}
		if err := checkTimeout("config.approval", wc.Approval.Timeout, wc.Approval.OnTimeout); err != nil {
			return wc, err
		}
	}
	return wc, nil
}

func checkTimeout(field, timeout, onTimeout string) error {
	if timeout != "" {
		if _, err := ParseWaitDuration(timeout); err != nil {
			return domain.Invalid(field+".timeout", "%s", err)
		}
	}
	if onTimeout != "" && onTimeout != OnTimeoutFail && onTimeout != OnTimeoutContinue {
		return domain.Invalid(field+".onTimeout", `must be "fail" (default) or "continue"`)
	}
	return nil
}

// checkWaitConfig checks a WAIT component's config.
func checkWaitConfig(config json.RawMessage) error {
	_, err := ParseWait(config)
	return err
}

// ValidateWaits compiles the `until` expressions of the WAIT components of a definition Validate
// accepted; the error names the component's field.
func (d Definition) ValidateWaits(check ExpressionCheck) error {
	for i, c := range d.Components {
		if c.Module != ModuleWait {
			continue
		}
		wc, _ := ParseWait(c.Config)
		if wc.Until == "" {
			continue
		}
		if err := check(wc.Until); err != nil {
			return domain.Invalid(fmt.Sprintf("components[%d] (component %q).config.until", i, c.ID), "%s", err)
		}
	}
	return nil
}
