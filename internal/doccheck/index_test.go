package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeIndexesEveryDoc fails when a document in docs/ is missing from the Documentation
// section of README.md, or when that section links a document that does not exist.
func TestReadmeIndexesEveryDoc(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Documentation\n")
	if !ok {
		t.Fatal("README.md has no ## Documentation section")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	linked := map[string]bool{}
	for _, m := range regexp.MustCompile(`\]\((docs/[^)#]+\.md)[^)]*\)`).FindAllStringSubmatch(section, -1) {
		linked[m[1]] = true
		if _, err := os.Stat(filepath.Join("..", "..", m[1])); err != nil {
			t.Errorf("README.md's index links %s, which does not exist", m[1])
		}
	}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel := "docs/" + filepath.Base(d)
		if !linked[rel] {
			t.Errorf("%s is not in README.md's ## Documentation index", rel)
		}
	}
}
