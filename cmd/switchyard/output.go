package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// printJSON writes v indented, for scripts (--json).
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printResult writes v as JSON when asJSON, else the human lines.
func printResult(w io.Writer, asJSON bool, v any, human ...string) error {
	if asJSON {
		return printJSON(w, v)
	}
	for _, line := range human {
		fmt.Fprintln(w, line)
	}
	return nil
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }
