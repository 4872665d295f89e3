package doccheck

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/domain"
	// Every domain package that registers events; TestEveryEventPackageIsImported fails when
	// one is missing here.
	_ "github.com/switchyard/switchyard/domain/apikey"
	_ "github.com/switchyard/switchyard/domain/app"
	_ "github.com/switchyard/switchyard/domain/appevent"
	_ "github.com/switchyard/switchyard/domain/authorization"
	_ "github.com/switchyard/switchyard/domain/billing"
	_ "github.com/switchyard/switchyard/domain/bulk"
	_ "github.com/switchyard/switchyard/domain/debounce"
	_ "github.com/switchyard/switchyard/domain/execution"
	_ "github.com/switchyard/switchyard/domain/hook"
	_ "github.com/switchyard/switchyard/domain/mcptoken"
	_ "github.com/switchyard/switchyard/domain/module"
	_ "github.com/switchyard/switchyard/domain/run"
	_ "github.com/switchyard/switchyard/domain/runnotify"
	_ "github.com/switchyard/switchyard/domain/schedule"
	_ "github.com/switchyard/switchyard/domain/session"
	_ "github.com/switchyard/switchyard/domain/signingkey"
	_ "github.com/switchyard/switchyard/domain/user"
	_ "github.com/switchyard/switchyard/domain/workflow"
	_ "github.com/switchyard/switchyard/domain/workspace"
)

var printRows = flag.Bool("print-rows", false, "print a catalogue row skeleton for each event type missing from docs/architecture.md")

const architectureDoc = "../../docs/architecture.md"

// eventType is a registered event: its stored name, Go type and the JSON members of its data.
type eventType struct {
	name   string
	goType reflect.Type
	fields []string
}

func registered(t *testing.T) []eventType {
	t.Helper()
	var out []eventType
	for _, name := range domain.Events.Types() {
		ev, err := domain.Events.Decode(name, []byte("{}"))
		if err != nil {
			t.Fatalf("decode a zero %s: %v", name, err)
		}
		rt := reflect.TypeOf(ev)
		out = append(out, eventType{name: name, goType: rt, fields: jsonFields(rt)})
	}
	return out
}

// jsonFields lists the top-level JSON member names of a struct, as encoding/json writes them
// (embedded structs flattened, "-" left out).
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// catalogueRow is one row of the event tables: | `Type` | stream | fields |.
var catalogueRow = regexp.MustCompile("^\\|\\s*`([A-Za-z0-9]+)`\\s*\\|([^|]*)\\|(.*)\\|\\s*$")

func catalogue(t *testing.T) map[string][2]string {
	t.Helper()
	data, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][2]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if m := catalogueRow.FindStringSubmatch(line); m != nil {
			if _, dup := rows[m[1]]; dup {
				t.Errorf("docs/architecture.md lists %s twice", m[1])
			}
			rows[m[1]] = [2]string{strings.TrimSpace(m[2]), m[3]}
		}
	}
	return rows
}

// TestEventCatalogueIsComplete fails when an event type is missing from the catalogue of
// docs/architecture.md, when its row lacks a stream or one of the event's JSON members, or
// when the catalogue lists a type nobody registers.
func TestEventCatalogueIsComplete(t *testing.T) {
	rows := catalogue(t)
	seen := map[string]bool{}
	var missing []string
	for _, ev := range registered(t) {
		seen[ev.name] = true
		row, ok := rows[ev.name]
		if !ok {
			missing = append(missing, ev.name)
			t.Errorf("docs/architecture.md: event %s (%s) is not in the catalogue", ev.name, ev.goType)
			continue
		}
		if !strings.Contains(row[0], "`") || !strings.Contains(row[0], "-") {
			t.Errorf("docs/architecture.md: %s: the stream cell %q names no stream such as `execution-<id>`", ev.name, row[0])
		}
		for _, f := range ev.fields {
			if !strings.Contains(row[1], "`"+f+"`") {
				t.Errorf("docs/architecture.md: %s: member `%s` is not in its fields cell", ev.name, f)
			}
		}
	}
	for name := range rows {
		if !seen[name] {
			t.Errorf("docs/architecture.md lists %s, which no domain package registers", name)
		}
	}
	if *printRows {
		for _, ev := range registered(t) {
			if contains(missing, ev.name) {
				fmt.Printf("| `%s` | `?-<id>` | `%s` |\n", ev.name, strings.Join(ev.fields, "`, `"))
			}
		}
	}
}

// TestEveryEventPackageIsImported keeps the import list above complete: a domain package that
// registers events but is not imported would leave its events out of the check unnoticed.
func TestEveryEventPackageIsImported(t *testing.T) {
	imported := map[string]bool{}
	for _, ev := range registered(t) {
		imported[ev.goType.PkgPath()] = true
	}
	dirs, err := filepath.Glob("../../domain/*")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(src), "domain.Events.Register(") {
				pkg := "github.com/switchyard/switchyard/domain/" + filepath.Base(dir)
				if !imported[pkg] {
					missing = append(missing, pkg)
				}
				break
			}
		}
	}
	sort.Strings(missing)
	for _, pkg := range missing {
		t.Errorf("%s registers events but internal/doccheck does not import it: add _ %q", pkg, pkg)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
