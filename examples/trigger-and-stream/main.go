// Command trigger-and-stream starts a run of a workflow and prints the run's stream until it
// ends.
//
//	go run ./examples/trigger-and-stream WORKFLOW_ID ['{"input":"object"}']
//
// It reads SWITCHYARD_URL (default http://localhost:8080), SWITCHYARD_API_KEY and
// SWITCHYARD_API_SECRET like submit-and-wait. The optional second argument is the trigger's
// input. Each run the trigger started (one per ON_API_CALLED component of the workflow) is
// followed in turn; a dropped connection is resumed by the client with Last-Event-ID. Ctrl-C
// first asks the service to cancel the runs, a second Ctrl-C quits at once. The exit status is
// 1 if a run FAILED.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/switchyard/switchyard/client"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 || strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprintln(os.Stderr, "usage: trigger-and-stream WORKFLOW_ID [INPUT_JSON]")
		os.Exit(2)
	}
	var input any
	if len(os.Args) == 3 {
		if err := json.Unmarshal([]byte(os.Args[2]), &input); err != nil {
			fmt.Fprintln(os.Stderr, "trigger-and-stream: the input must be JSON:", err)
			os.Exit(2)
		}
	}
	ok, err := run(os.Args[1], input)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trigger-and-stream:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(workflowID string, input any) (bool, error) {
	c, err := clientFromEnv()
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs, err := c.TriggerWorkflow(ctx, workflowID, input)
	if err != nil {
		return false, fmt.Errorf("trigger: %w", err)
	}
	go cancelOnInterrupt(c, runs, cancel)

	allOK := true
	for _, r := range runs {
		fmt.Printf("run %s (job %s)\n", r.RunID, r.JobID)
		var last *client.RunEvent
		for e, err := range c.StreamRun(ctx, r.RunID, nil) {
			if err != nil {
				return false, fmt.Errorf("stream %s: %w", r.RunID, err)
			}
			printEvent(e)
			last = e
		}
		if last == nil || last.Status != client.StatusCompleted {
			allOK = false
		}
	}
	return allOK, nil
}

func printEvent(e *client.RunEvent) {
	o := e.Output
	line := fmt.Sprintf("%s %-9s pending=%d failed=%d usage=%g", e.Timestamp.Format(time.TimeOnly), e.Status,
		o.PendingStageCount, o.FailedStageCount, o.TotalUsage)
	if e.Canceled() {
		reason := ""
		if o.CancelReason != nil {
			reason = *o.CancelReason
		}
		line += fmt.Sprintf(" canceled (%q)", reason)
	} else if len(e.Error) > 0 && string(e.Error) != "null" {
		line += " error=" + string(e.Error)
	}
	fmt.Println(line)
	for _, s := range o.NonTerminalStages {
		it := ""
		if s.Iteration >= 0 {
			it = fmt.Sprintf("[%d]", s.Iteration)
		}
		fmt.Printf("    %-8s %s%s %s attempt %d\n", s.Status, s.ReferenceID, it, s.Module, s.ExecutionAttempt)
	}
}

// cancelOnInterrupt cancels the runs on the first Ctrl-C (their streams then end with the
// terminal FAILED event) and quits on the second.
func cancelOnInterrupt(c *client.Client, runs []client.TriggeredRun, quit context.CancelFunc) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt)
	<-sig
	fmt.Fprintln(os.Stderr, "canceling; Ctrl-C again to quit")
	go func() {
		<-sig
		quit()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, r := range runs {
		if _, err := c.CancelRun(ctx, r.RunID, "interrupted by trigger-and-stream"); err != nil && !client.IsStatus(err, 409) {
			fmt.Fprintln(os.Stderr, "cancel:", err)
		}
	}
}

func clientFromEnv() (*client.Client, error) {
	base := os.Getenv("SWITCHYARD_URL")
	if base == "" {
		base = "http://localhost:8080"
	}
	key, secret := os.Getenv("SWITCHYARD_API_KEY"), os.Getenv("SWITCHYARD_API_SECRET")
	if key == "" || secret == "" {
		return nil, errors.New("set SWITCHYARD_API_KEY and SWITCHYARD_API_SECRET")
	}
	c, err := client.New(base, key, secret)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c, nil
}
