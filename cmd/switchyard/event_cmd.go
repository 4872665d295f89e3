package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/httpapi"
)

func newEventCmd() *cobra.Command {
	e := &cobra.Command{Use: "event", Short: "Send events to the workflows listening for them (docs/workflows.md, Events)"}
	e.AddCommand(newEventSendCmd())
	return e
}

// newEventSendCmd sends an event as POST /v1/sdk/events does. The workflows listening for it
// are found in the eventtriggers read model, which a running serve keeps current.
func newEventSendCmd() *cobra.Command {
	var workspaceID string
	var asJSON bool
	var f signalFlags
	cmd := &cobra.Command{
		Use:   "send --workspace ID|NAME --name N [--payload JSON] [--id ID]",
		Short: "Start a run of every workflow whose ON_EVENT trigger listens for the event; a running serve runs them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, payload, id, err := f.request(cmd)
			if err != nil {
				return err
			}
			c, err := httpapi.ParseEvent(httpapi.EventRequest{Name: name, Payload: payload, ID: id})
			if err != nil {
				return flagError(err, "name", "payload", "id")
			}
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				c.WorkspaceID, c.Triggers = workspaceID, a.queries
				sent, err := a.cmds.Events.SendEvent(cliContext(cmd), c)
				if err != nil {
					return flagError(err, "name", "payload", "id")
				}
				head := fmt.Sprintf("event %s: %d runs", sent.EventID, len(sent.Runs))
				if sent.Duplicate {
					head = fmt.Sprintf("event %s: a duplicate (sent within 24 hours); its runs were", sent.EventID)
				}
				lines := []string{head}
				for _, r := range sent.Runs {
					line := fmt.Sprintf("  workflow %s  run %s", r.WorkflowID, r.RunID)
					if r.Debounced {
						line += "  (debounced: starts when its key's window closes)"
					}
					lines = append(lines, line)
				}
				if len(sent.Runs) == 0 {
					warnTriggersBehind(cmd, a)
				}
				return printResult(cmd.OutOrStdout(), asJSON, sent, lines...)
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	f.add(cmd, "event")
	return cmd
}

// warnTriggersBehind tells the operator, on standard error, when an event started nothing while
// the eventtriggers read model lags the log: with no serve running, a workflow saved since it
// last caught up is not found (projections rebuild eventtriggers brings it up to date).
func warnTriggersBehind(cmd *cobra.Command, a *app) {
	st, err := a.engine.Status(cmd.Context())
	if err != nil {
		return // only a hint: the event itself was sent
	}
	for _, s := range st {
		if s.Name == "eventtriggers" && (s.Lag > 0 || s.LagCapped) {
			fmt.Fprintf(cmd.ErrOrStderr(), "note: the eventtriggers read model is %d events behind the log (is serve running?); "+
				"workflows saved since are not found until it catches up (switchyard projections rebuild eventtriggers)\n", s.Lag)
		}
	}
}
