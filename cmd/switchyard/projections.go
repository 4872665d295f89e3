package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/projections"
)

func newProjectionsCmd() *cobra.Command {
	p := &cobra.Command{Use: "projections", Short: "Inspect and rebuild read models"}
	p.AddCommand(newProjectionsStatusCmd(), newProjectionsRebuildCmd())
	return p
}

func newProjectionsStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each projector's position, events applied and lag",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withApp(cmd.Context(), func(a *app) error {
				st, err := a.engine.Status(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), st)
				}
				tw := newTable(cmd.OutOrStdout())
				fmt.Fprintln(tw, "PROJECTOR\tPOSITION\tAPPLIED\tLAG\tLAST EVENT\tSTATE")
				for _, s := range st {
					last, state, lag := "-", "ok", fmt.Sprint(s.Lag)
					if s.LastEventAt != nil {
						last = s.LastEventAt.UTC().Format(time.RFC3339)
					}
					if s.LagCapped {
						lag = ">" + lag
					}
					if s.Error != "" {
						state = "FAILED: " + s.Error
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", s.Name, s.PositionText, s.EventsApplied, lag, last, state)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newProjectionsRebuildCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "rebuild NAME... | --all",
		Short: "Rebuild read models from the start of the log into fresh tables, then swap them in",
		Long: "Rebuild replays the whole event log into fresh copies of a projector's tables in a shadow\n" +
			"schema while the live tables keep serving, then swaps them in within one transaction.\n" +
			"Running serve processes keep working; the projector pauses only for the final swap.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return fmt.Errorf("name one or more projectors, or pass --all")
			}
			a, err := openApp(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer a.Close()
			names := args
			if all {
				names = nil
				for _, p := range a.engine.Projectors() {
					names = append(names, p.Name())
				}
			}
			out := cmd.OutOrStdout()
			for _, name := range names {
				last := time.Time{}
				err := a.engine.Rebuild(cmd.Context(), name, func(p projections.RebuildProgress) {
					if !p.Done && time.Since(last) < time.Second {
						return
					}
					last = time.Now()
					rate := float64(p.Applied) / max(p.Elapsed.Seconds(), 1e-9)
					state := "replaying"
					if p.Done {
						state = "swapped in"
					}
					fmt.Fprintf(out, "%s: %s, %d events at %s (%.0f events/s, %s)\n", name, state, p.Applied, p.Position, rate, p.Elapsed.Round(time.Millisecond))
				})
				if err != nil {
					return fmt.Errorf("rebuild %s: %w", name, err)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "rebuild every projector")
	return cmd
}
