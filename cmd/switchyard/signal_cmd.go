package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/httpapi"
)

// payloadFlag reads --payload: JSON, or nil when the flag was not given.
func payloadFlag(cmd *cobra.Command, raw string) (json.RawMessage, error) {
	if !cmd.Flags().Changed("payload") {
		return nil, nil
	}
	if !json.Valid([]byte(raw)) {
		return nil, errors.New("--payload: must be JSON (for example '{\"amount\": 3}')")
	}
	return json.RawMessage(raw), nil
}

// flagError names the flag of a field the command refused (name, payload, id), so the operator
// reads --name where the API says name.
func flagError(err error, flags ...string) error {
	var ve *domain.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	field, _, _ := strings.Cut(ve.Field, ".")
	for _, f := range flags {
		if f == field {
			return fmt.Errorf("--%s%s: %s", f, strings.TrimPrefix(ve.Field, field), ve.Message)
		}
	}
	return err
}

// signalFlags are the flags of a signal or event: --name, --payload and --id, as the API's
// name, payload and id.
type signalFlags struct {
	name, payload, id string
}

func (f *signalFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.name, "name", "", "the "+what+"'s name (required)")
	cmd.Flags().StringVar(&f.payload, "payload", "", "the "+what+"'s payload, JSON")
	cmd.Flags().StringVar(&f.id, "id", "", "your id of the "+what+": sent again, it changes nothing (default: a new id)")
	cmd.MarkFlagRequired("name")
}

// request reads the flags as the API's body; an --id given empty is kept, for the API's check.
func (f *signalFlags) request(cmd *cobra.Command) (name *string, payload json.RawMessage, id *string, err error) {
	if payload, err = payloadFlag(cmd, f.payload); err != nil {
		return nil, nil, nil, err
	}
	if cmd.Flags().Changed("id") {
		id = &f.id
	}
	return &f.name, payload, id, nil
}

// newWorkflowSignalCmd sends a signal to a run (POST .../executions/{runId}/signals).
func newWorkflowSignalCmd() *cobra.Command {
	var workspaceID string
	var asJSON bool
	var f signalFlags
	cmd := &cobra.Command{
		Use:   "signal RUN_ID --workspace ID|NAME --name N [--payload JSON] [--id ID]",
		Short: "Send a signal to a run: its stages waiting for the name complete with the payload, or the run keeps it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, payload, id, err := f.request(cmd)
			if err != nil {
				return err
			}
			c, err := httpapi.ParseSignal(httpapi.SignalRequest{Name: name, Payload: payload, ID: id})
			if err != nil {
				return flagError(err, "name", "payload", "id")
			}
			return withWorkspace(cmd.Context(), &workspaceID, func(a *app) error {
				c.WorkspaceID, c.RunID = workspaceID, args[0]
				res, err := a.cmds.Waits.Signal(cliContext(cmd), c)
				if err != nil {
					return flagError(err, "name", "payload", "id")
				}
				line := fmt.Sprintf("signal %s to run %s: completed stages %s", res.ID, res.RunID, strings.Join(res.Completed, ", "))
				switch {
				case res.Duplicate:
					line = fmt.Sprintf("signal %s to run %s: a duplicate (the run has this id already); nothing changed", res.ID, res.RunID)
				case len(res.Completed) == 0:
					line = fmt.Sprintf("signal %s to run %s: kept for the run (no stage waits for it yet)", res.ID, res.RunID)
				}
				return printResult(cmd.OutOrStdout(), asJSON, res, line)
			})
		},
	}
	workflowFlags(cmd, &workspaceID, &asJSON)
	f.add(cmd, "signal")
	return cmd
}
