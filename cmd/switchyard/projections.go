package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
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
			"Running serve processes keep working; the projector pauses only for the final swap.\n" +
			"It prints progress every second: events replayed of the total, percentage, rate and time left.\n\n" +
			"Projectors: " + strings.Join(projectorNames(), ", "),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return fmt.Errorf("name one or more projectors, or pass --all (projectors: %s)", strings.Join(projectorNames(), ", "))
			}
			names := args
			if all {
				names = projectorNames()
			}
			if err := knownProjectors(names); err != nil {
				return err
			}
			a, err := openApp(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer a.Close()
			for _, name := range names {
				if err := rebuildOne(cmd.Context(), a, name, cmd.OutOrStdout()); err != nil {
					return fmt.Errorf("rebuild %s: %w", name, err)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "rebuild every projector")
	return cmd
}

// projectorNames lists the projectors serve runs, in their order.
func projectorNames() []string {
	var names []string
	for _, p := range projections.All() {
		names = append(names, p.Name())
	}
	return names
}

// knownProjectors refuses unknown names before anything is rebuilt, listing the known ones.
func knownProjectors(names []string) error {
	known := projectorNames()
	for _, n := range names {
		if !slices.Contains(known, n) {
			return fmt.Errorf("unknown projector %q; the projectors are: %s", n, strings.Join(known, ", "))
		}
	}
	return nil
}

// rebuildOne rebuilds one projector, printing progress at most once a second and at the end.
func rebuildOne(ctx context.Context, a *app, name string, out io.Writer) error {
	total, exact, err := rebuildTotal(ctx, a, name)
	if err != nil {
		return err
	}
	approx := "~"
	if exact {
		approx = ""
	}
	fmt.Fprintf(out, "%s: replaying %s%d events into fresh tables\n", name, approx, total)
	last := time.Time{}
	return a.engine.Rebuild(ctx, name, func(p projections.RebuildProgress) {
		if !p.Done && time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		fmt.Fprintln(out, progressLine(name, p, total))
	})
}

// rebuildTotal estimates how many events a rebuild of name replays: what the live projector
// applied plus what it has still to apply. exact is false when that is an estimate (the live
// count, or a lag count that was capped).
func rebuildTotal(ctx context.Context, a *app, name string) (total int64, exact bool, err error) {
	st, err := a.engine.Status(ctx)
	if err != nil {
		return 0, false, err
	}
	for _, s := range st {
		if s.Name == name {
			return s.EventsApplied + s.Lag, s.EventsApplied == 0 && !s.LagCapped, nil
		}
	}
	return 0, false, fmt.Errorf("projector %q has no status", name)
}

// progressLine is one line of rebuild progress: replayed of total, percentage, rate, time left.
func progressLine(name string, p projections.RebuildProgress, total int64) string {
	rate := float64(p.Applied) / max(p.Elapsed.Seconds(), 1e-9)
	if p.Done {
		return fmt.Sprintf("%s: swapped in, %d events replayed in %s (%.0f events/s)", name, p.Applied, p.Elapsed.Round(time.Millisecond), rate)
	}
	total = max(total, p.Applied) // events appended since the estimate
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(p.Applied) / float64(total)
	}
	left := "unknown"
	if rate > 0 {
		left = (time.Duration(float64(total-p.Applied) / rate * float64(time.Second))).Round(time.Second).String()
	}
	return fmt.Sprintf("%s: %d of %d events (%.0f%%), %.0f events/s, %s left", name, p.Applied, total, pct, rate, left)
}
