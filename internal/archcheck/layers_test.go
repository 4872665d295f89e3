package archcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/switchyard/switchyard"

// mayImport is the layer diagram of DESIGN.md section 2: the folders (floors) each folder's
// packages may import, besides their own. A package imports only what its floor lists; an
// arrow not here is an import back up (or sideways between rooms that do not know each other),
// and a folder not here is a floor the diagram does not have yet. Tests are not held to it:
// they may build the stack above the package they test.
var mayImport = map[string][]string{
	// The ground floor: imports nothing of ours above it.
	"domain":     nil,
	"eventstore": nil,
	"modules":    nil,
	"seal":       nil,
	"client":     nil,
	"internal":   {"domain", "eventstore"},
	"config":     {"seal"},
	// The write and read sides.
	"commands":    {"domain", "eventstore", "modules", "seal", "internal"},
	"projections": {"domain", "eventstore", "internal"},
	// Processes that follow the log and issue commands.
	"reactors": {"commands", "projections", "domain", "eventstore", "modules", "seal", "internal"},
	// What the web edge shares from below it: the error table and bearer tokens.
	"web": {"domain", "internal"},
	// The web edge: three rooms, none of which imports another's routes; the console signs
	// people in through identity.
	"httpapi":  {"commands", "projections", "reactors", "web", "domain", "modules", "internal"},
	"identity": {"commands", "projections", "web", "domain", "seal", "internal"},
	"console":  {"commands", "projections", "identity", "web", "domain", "internal"},
	// The routes of the three, assembled above them.
	"server": {"httpapi", "identity", "console", "commands", "projections", "reactors", "web", "domain", "modules", "internal"},
	// Test support: the core of the service for tests (non-test code never imports it).
	"testenv": {"commands", "projections", "domain", "eventstore", "internal"},
	// The binary and the programs around it: the top floor, which nothing imports.
	"cmd":      {"server", "httpapi", "identity", "console", "reactors", "commands", "projections", "web", "domain", "eventstore", "modules", "seal", "config", "client", "internal"},
	"examples": {"client"},
	"scripts":  nil,
}

// listed is the part of `go list -json` these tests read.
type listed struct {
	ImportPath string
	Name       string
	Dir        string
	Imports    []string
	GoFiles    []string
}

// ourPackages lists every package of the module from the repository's root, with the imports
// of its non-test files.
func ourPackages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages of the module; is the test run from internal/archcheck?", len(pkgs))
	}
	return pkgs
}

// floor is the top-level folder of one of our import paths, "" for another module's.
func floor(importPath string) string {
	rest, ok := strings.CutPrefix(importPath, module+"/")
	if !ok {
		return ""
	}
	top, _, _ := strings.Cut(rest, "/")
	return top
}

// TestImportsFollowTheLayers fails on an import between two floors that DESIGN.md section 2
// does not draw, and on a package in a folder the diagram does not place.
func TestImportsFollowTheLayers(t *testing.T) {
	for _, p := range ourPackages(t) {
		from := floor(p.ImportPath)
		allowed, placed := mayImport[from]
		if !placed {
			t.Errorf("%s: the folder %s/ has no floor in mayImport (DESIGN.md section 2)", p.ImportPath, from)
			continue
		}
		for _, imp := range p.Imports {
			to := floor(imp)
			if to == "" || to == from {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || a == to
			}
			if !ok {
				t.Errorf("%s imports %s: %s/ may not import %s/ (DESIGN.md section 2)", p.ImportPath, imp, from, to)
			}
		}
	}
}

// TestFloorsHaveNoCircle fails when the diagram, or the imports, go round in a circle between
// floors: then no floor of the circle is above the others.
func TestFloorsHaveNoCircle(t *testing.T) {
	edges := map[string]map[string]bool{}
	add := func(from, to string) {
		if edges[from] == nil {
			edges[from] = map[string]bool{}
		}
		edges[from][to] = true
	}
	for from, tos := range mayImport {
		for _, to := range tos {
			add(from, to)
		}
	}
	for _, p := range ourPackages(t) {
		for _, imp := range p.Imports {
			if from, to := floor(p.ImportPath), floor(imp); to != "" && to != from {
				add(from, to)
			}
		}
	}
	if circle := findCircle(edges); circle != nil {
		t.Errorf("the floors go round in a circle: %s", strings.Join(circle, " -> "))
	}
}

// findCircle returns a circle of edges (its first node repeated at the end), nil when none.
func findCircle(edges map[string]map[string]bool) []string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = open
		stack = append(stack, n)
		for _, m := range sortedKeys(edges[n]) {
			switch state[m] {
			case open:
				for i, s := range stack {
					if s == m {
						return append(append([]string{}, stack[i:]...), m)
					}
				}
			case unseen:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return nil
	}
	for _, n := range sortedKeys(edges) {
		if state[n] == unseen {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestFindCircle(t *testing.T) {
	if c := findCircle(map[string]map[string]bool{"a": {"b": true}, "b": {"c": true}}); c != nil {
		t.Errorf("a line has a circle: %v", c)
	}
	c := findCircle(map[string]map[string]bool{"a": {"b": true}, "b": {"c": true}, "c": {"a": true}})
	if strings.Join(c, " ") != "a b c a" {
		t.Errorf("circle %v, want a b c a", c)
	}
}

// TestFoldersAreNamedAsTheirPackages fails on a library package whose folder has another name
// than the package (a reader looks for package httpapi in httpapi/).
func TestFoldersAreNamedAsTheirPackages(t *testing.T) {
	for _, p := range ourPackages(t) {
		if p.Name != "main" && path.Base(p.ImportPath) != p.Name {
			t.Errorf("%s holds package %s: name the folder %s", p.ImportPath, p.Name, p.Name)
		}
	}
}
