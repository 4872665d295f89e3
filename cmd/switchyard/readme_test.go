package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestReadmeCommandTree keeps the command tree in README.md's "Command line" section in step
// with the binary: every command and subcommand appears, and every name there is a command.
// An entry is "name [sub | sub ...]" (or "name ..." for subcommands left out), before two spaces;
// "a ... / b ..." is two entries.
func TestReadmeCommandTree(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```\nswitchyard\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no command tree (a code block starting with the line switchyard)")
	}
	documented := parseCommandTree(block) // "admin apikey" -> {"create", "revoke"}
	root := newRootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()

	var walk func(c *cobra.Command, path string)
	walk = func(c *cobra.Command, path string) {
		shown := documented[path]
		var names []string
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			names = append(names, sub.Name())
			if !shown[sub.Name()] && !shown["..."] {
				t.Errorf("README.md's command tree does not show %q", strings.TrimSpace("switchyard "+path+" "+sub.Name()))
			}
			walk(sub, strings.TrimSpace(path+" "+sub.Name()))
		}
		for name := range shown {
			if name != "..." && !slices.Contains(names, name) {
				t.Errorf("README.md's command tree shows %q, which is no command", strings.TrimSpace("switchyard "+path+" "+name))
			}
		}
	}
	walk(root, "")
	if len(documented[""]) < 5 {
		t.Fatalf("parsed too little of the command tree: %v", documented)
	}
}

var (
	treeLine  = regexp.MustCompile(`^((?:│   |    )*)[├└]── (.*)$`)
	commandID = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
)

// parseCommandTree maps each command path ("" for the root) to the subcommand names the tree
// shows for it ("..." when it leaves some out).
func parseCommandTree(block string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	add := func(path, name string) {
		if out[path] == nil {
			out[path] = map[string]bool{}
		}
		out[path][name] = true
	}
	var parents []string // the command at each depth above the current line
	for _, line := range strings.Split(block, "\n") {
		m := treeLine.FindStringSubmatch(line)
		if m == nil {
			continue // a continuation line
		}
		depth := len([]rune(m[1])) / 4
		entry, _, _ := strings.Cut(m[2], "  ")
		parents = parents[:min(depth, len(parents))]
		parent := strings.Join(parents, " ")
		var first string
		for _, part := range strings.Split(entry, " / ") {
			words := strings.Fields(part)
			name := words[0]
			if first == "" {
				first = name
			}
			add(parent, name)
			path := strings.TrimSpace(parent + " " + name)
			for _, w := range words[1:] {
				if w == "..." || commandID.MatchString(w) {
					add(path, w)
				}
			}
		}
		parents = append(parents, first)
	}
	return out
}
