package archcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// maxHandlerMethods bounds the methods of each exported type of commands, promoted ones
// included: a handler that would pass it is split by noun (docs/architecture.md, "Where does a
// new command go?").
const maxHandlerMethods = 25

// TestHandlersStaySmall fails on an exported type of commands with more than
// maxHandlerMethods methods in the method set of its pointer, exported or not, promoted ones
// included: what a reader of the type must hold in mind.
func TestHandlersStaySmall(t *testing.T) {
	pkg := typeCheck(t, module+"/commands")
	scope := pkg.Scope()
	checked := 0
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || !tn.Exported() || tn.IsAlias() {
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok || types.IsInterface(named) {
			continue
		}
		checked++
		n := types.NewMethodSet(types.NewPointer(named)).Len()
		t.Logf("commands.%s: %d methods", name, n)
		if n > maxHandlerMethods {
			t.Errorf("commands.%s has %d methods, more than %d: split it by noun", name, n, maxHandlerMethods)
		}
	}
	if checked == 0 {
		t.Fatal("no exported type found in commands")
	}
}

// typeCheck type-checks the non-test files of the package at importPath, its imports read
// from the export data `go list -export` builds.
func typeCheck(t *testing.T, importPath string) *types.Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json", importPath)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	var target struct {
		Dir     string
		GoFiles []string
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath, Dir, Export string
			GoFiles                 []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if p.ImportPath == importPath {
			target.Dir, target.GoFiles = p.Dir, p.GoFiles
		}
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range target.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(target.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, errors.New("no export data for " + path)
		}
		return os.Open(file)
	})
	pkg, err := (&types.Config{Importer: imp}).Check(importPath, fset, files, nil)
	if err != nil {
		t.Fatalf("type-check %s: %v", importPath, err)
	}
	return pkg
}
