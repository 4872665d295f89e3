package console

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/switchyard/switchyard/domain/run"
)

// How the console words a run: the API's statuses stay as SPEC.md has them (a canceled run is
// FAILED with cancelRequestedAt set), the page says what happened.

// StatusCanceled is what the console shows for a run that was canceled, and for the stages
// its cancel stopped; the API says FAILED for both (SPEC.md 3).
const StatusCanceled = "CANCELED"

// failureCode is the code of a recorded failure object; "" when it has none.
func failureCode(raw json.RawMessage) string {
	var e struct {
		Code string `json:"code"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &e) != nil {
		return ""
	}
	return e.Code
}

// runLabel is the run's status as the page says it.
func runLabel(d run.Detail) string {
	if d.Status == run.StatusFailed && d.CancelRequestedAt != nil {
		return StatusCanceled
	}
	return string(d.Status)
}

// StatusSkipped is what the console shows for a stage none of whose incoming edges was taken;
// the API says COMPLETED with skipped set.
const StatusSkipped = "SKIPPED"

// viewLabel is a rendered stage's status as the page says it: SKIPPED, CANCELED or its own.
func viewLabel(v run.StageView) string {
	if v.Skipped {
		return StatusSkipped
	}
	return stageLabel(v.Status, v.Error)
}

// stageLabel is a stage's status as the page says it: CANCELED for one the run's cancel
// stopped.
func stageLabel(status run.StageStatus, failure json.RawMessage) string {
	if status == run.StageStatusFailed && failureCode(failure) == "canceled" {
		return StatusCanceled
	}
	return string(status)
}

// canceledStages counts the stages the run's cancel stopped.
func canceledStages(st *run.State) int {
	n := 0
	for _, s := range st.Stages {
		if stageLabel(s.Status, s.Error) == StatusCanceled {
			n++
		}
	}
	return n
}

// runErrorText is the run's failure in words: for a failed stage, the stage by name (and
// item) with its own error rather than the stage's id; for a cancel, the reason.
func runErrorText(st *run.State) string {
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		StageID string `json:"stageId"`
	}
	if len(st.Error) == 0 || json.Unmarshal(st.Error, &e) != nil {
		return failureText(st.Error)
	}
	switch e.Code {
	case "stage_failed":
		if s, ok := st.Stage(e.StageID); ok {
			return stageFailureText(s)
		}
	case "canceled":
		if st.CancelReason != "" {
			return "Canceled: " + st.CancelReason
		}
		return "Canceled."
	}
	return failureText(st.Error)
}

func stageFailureText(s run.Stage) string {
	name := s.Name
	if name == "" {
		name = s.ComponentID
	}
	text := fmt.Sprintf("Stage “%s”", name)
	if s.Iteration >= 0 {
		text += fmt.Sprintf(" (item %d)", s.Iteration)
	}
	if why := failureText(s.Error); why != "" {
		return text + " failed: " + why
	}
	return text + " failed."
}

// duration is the time from one moment to another in words ("1.2 s", "3 min 4 s"); blank
// when either is unknown. It takes time.Time and *time.Time, as the views hold both.
func duration(from, to any) string {
	a, b := moment(from), moment(to)
	if a.IsZero() || b.IsZero() || b.Before(a) {
		return ""
	}
	return humanDuration(b.Sub(a))
}

func moment(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t
	case *time.Time:
		if t != nil {
			return *t
		}
	}
	return time.Time{}
}

func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < 10*time.Second:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", math.Floor(d.Seconds()*10)/10), ".0") + " s"
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d days %d h", int(d.Hours())/24, int(d.Hours())%24)
}
