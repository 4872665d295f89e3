package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/httpapi"
)

// cliContext marks what a CLI command appends as the operator's (source "cli" in the events'
// metadata), as the other admin commands do.
func cliContext(cmd *cobra.Command) context.Context {
	return commands.WithMetadata(cmd.Context(), commands.Metadata{Source: "cli"})
}

// humanFires is how many next fires a schedule's human line shows (--json shows all 10).
const humanFires = 3

func scheduleLine(v commands.ScheduleView) string {
	when := "cron " + v.Cron
	if v.Every != "" {
		when = "every " + v.Every
	}
	state := "active"
	if v.Paused {
		state = "paused"
	}
	fires := make([]string, 0, humanFires)
	for _, f := range v.NextFires[:min(len(v.NextFires), humanFires)] {
		fires = append(fires, f.UTC().Format(time.RFC3339))
	}
	next := strings.Join(fires, ", ")
	if next == "" {
		next = "none"
	}
	return fmt.Sprintf("  schedule %-20s %s  %s (%s)  overlap %s  next %s", v.ComponentID, state, when, v.Timezone, v.Overlap, next)
}

// newWorkflowSchedulesCmd lists a workflow's ON_SCHEDULE components (GET .../schedules).
func newWorkflowSchedulesCmd() *cobra.Command {
	var workspaceID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "schedules WORKFLOW_ID --workspace ID|NAME",
		Short: "List a workflow's schedules: component, paused, next fires (--json: the next 10)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				views, err := a.cmds.Schedules.Schedules(cmd.Context(), workspaceID, args[0])
				if err != nil {
					return err
				}
				lines := []string{fmt.Sprintf("workflow %s: %d schedules", args[0], len(views))}
				for _, v := range views {
					lines = append(lines, scheduleLine(v))
				}
				return printResult(cmd.OutOrStdout(), asJSON, httpapi.Schedules{WorkflowID: args[0], Schedules: views}, lines...)
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	return cmd
}

// newWorkflowScheduleCmd groups pause, resume and trigger of one schedule.
func newWorkflowScheduleCmd() *cobra.Command {
	s := &cobra.Command{Use: "schedule", Short: "Pause, resume or fire one schedule of a workflow (docs/workflows.md, Schedules)"}
	s.AddCommand(
		newScheduleChangeCmd("pause", "Stop a schedule firing until it is resumed (runs already started go on)",
			func(c *commands.Commands) scheduleChange { return c.Schedules.PauseSchedule }),
		newScheduleChangeCmd("resume", "Have a paused schedule fire again from its next fire time (missed fires do not run)",
			func(c *commands.Commands) scheduleChange { return c.Schedules.ResumeSchedule }),
		newScheduleTriggerCmd())
	return s
}

type scheduleChange func(ctx context.Context, workspaceID, workflowID, componentID string) (commands.ScheduleView, error)

func newScheduleChangeCmd(verb, short string, change func(*commands.Commands) scheduleChange) *cobra.Command {
	var workspaceID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   verb + " WORKFLOW_ID COMPONENT_ID --workspace ID|NAME",
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				v, err := change(a.cmds)(cliContext(cmd), workspaceID, args[0], args[1])
				if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON, v, "workflow "+args[0]+":", scheduleLine(v))
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	return cmd
}

func newScheduleTriggerCmd() *cobra.Command {
	var workspaceID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "trigger WORKFLOW_ID COMPONENT_ID --workspace ID|NAME",
		Short: "Start one run of the schedule now, whatever its fire times, overlap or pause; a running serve runs it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				started, err := a.cmds.Schedules.TriggerSchedule(cliContext(cmd), workspaceID, args[0], args[1], "")
				if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON, started,
					fmt.Sprintf("started run %s (job %s) of workflow %s from schedule %s", started.RunID, started.JobID, args[0], args[1]))
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	return cmd
}
