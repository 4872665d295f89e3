package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/projections"
)

func newBillingCmd() *cobra.Command {
	b := &cobra.Command{Use: "billing", Short: "Billing tools"}
	b.AddCommand(newBillingAuditCmd())
	return b
}

func newBillingAuditCmd() *cobra.Command {
	var asJSON bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "audit WORKSPACE",
		Short: "Fold a workspace's billing stream and compare it with the read models; non-zero exit on any difference",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws := args[0]
			return withWorkspace(cmd.Context(), &ws, func(a *app) error {
				if _, err := a.cmds.Workspaces.Workspace(cmd.Context(), ws); err != nil {
					return err
				}
				rep, err := projections.AuditBilling(cmd.Context(), a.store, a.queries, ws, func(last eventstore.Position) {
					a.waitForProjector(cmd.Context(), cmd.ErrOrStderr(), projections.Billing{}.Name(), last, wait)
				})
				if err != nil {
					return err
				}
				if asJSON {
					err = printJSON(cmd.OutOrStdout(), rep)
				} else {
					err = printAudit(cmd.OutOrStdout(), rep)
				}
				if err != nil {
					return err
				}
				if !rep.Clean() {
					return &exitError{code: 2}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Second, "how long to wait for a running billing projector to apply the stream's latest events (0: compare at once)")
	return cmd
}

// waitForProjector gives a running projector up to wait to reach pos, so a fresh change is
// audited in full; if it does not, the audit compares at the revision the read model reached.
// It waits only when the read model is behind and a process runs the projector, and says so on
// w; with no serve process running nothing would catch up, so it does not wait at all.
func (a *app) waitForProjector(ctx context.Context, w io.Writer, name string, pos eventstore.Position, wait time.Duration) {
	quick, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	reached := a.engine.WaitFor(quick, name, pos) == nil
	cancel()
	if reached || wait <= 0 {
		return
	}
	active, err := a.engine.Active(ctx, name)
	if err != nil || !active {
		fmt.Fprintf(w, "note: the %s read model is behind the log and no serve process runs its projector; comparing at the revision it reached\n", name)
		return
	}
	fmt.Fprintf(w, "waiting up to %s for the %s projector (running in a serve process) to apply the latest billing events...\n", wait, name)
	ctx, cancel = context.WithTimeout(ctx, wait)
	defer cancel()
	_ = a.engine.WaitFor(ctx, name, pos)
}

func printAudit(w io.Writer, rep projections.AuditReport) error {
	fmt.Fprintf(w, "Billing history of workspace %s\n\n", rep.WorkspaceID)
	tw := newTable(w)
	fmt.Fprintln(tw, "REV\tTIME\tKIND\tAMOUNT\tCREDIT\tUSAGE\tREFERENCE")
	for _, e := range rep.Entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Revision, e.At.UTC().Format(time.RFC3339), e.Kind, e.Amount, e.CreditAfter, e.UsageAfter, e.Reference)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nlog:        credit %s, usage %s, total %s\n", rep.Folded.Credit, rep.Folded.Usage, rep.Folded.Total)
	fmt.Fprintf(w, "read model: credit %s, usage %s, total %s (revision %d)\n", rep.ReadModel.Credit, rep.ReadModel.Usage, rep.ReadModel.Total, rep.ReadModelRevision)
	if rep.Behind {
		fmt.Fprintln(w, "note: the read model is behind the log; it was compared at the revision it reached")
	}
	if rep.Clean() {
		fmt.Fprintln(w, "audit: clean")
		return nil
	}
	fmt.Fprintf(w, "audit: %d difference(s)\n", len(rep.Differences))
	for _, d := range rep.Differences {
		fmt.Fprintln(w, "  -", d)
	}
	return nil
}
