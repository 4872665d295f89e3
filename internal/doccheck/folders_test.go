package doccheck

import (
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestReadmeFolderTable fails when a top-level folder of the repository has no row in the
// folder table of README.md's Architecture section, or a row names a folder that does not exist.
func TestReadmeFolderTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n| Folder | What lives there |\n")
	if !ok {
		t.Fatal("README.md has no folder table (| Folder | What lives there |)")
	}
	if i := strings.Index(table, "\n\n"); i >= 0 {
		table = table[:i]
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`/]+)/[^`]*` \\|").FindAllStringSubmatch(table, -1) {
		rows[m[1]] = true
	}
	folders := topLevelFolders(t)
	for _, f := range folders {
		if !rows[f] {
			t.Errorf("%s/ is a top-level folder with no row in README.md's folder table", f)
		}
	}
	for r := range rows {
		if _, err := os.Stat("../../" + r); err != nil {
			t.Errorf("README.md's folder table has a row for %s/, which does not exist", r)
		}
	}
	if len(rows) == 0 {
		t.Fatal("README.md's folder table has no rows")
	}
}

// topLevelFolders lists the repository's top-level folders as a clone has them: those git
// tracks, or, outside git, those present but for hidden ones and the ignored build and state
// folders.
func topLevelFolders(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	if out, err := exec.Command("git", "-C", "../..", "ls-files", "--cached", "--others", "--exclude-standard").Output(); err == nil {
		for _, f := range strings.Split(string(out), "\n") {
			if dir, _, ok := strings.Cut(f, "/"); ok && !strings.HasPrefix(dir, ".") {
				seen[dir] = true
			}
		}
	} else {
		entries, err := os.ReadDir("../..")
		if err != nil {
			t.Fatal(err)
		}
		ignored := map[string]bool{"bin": true, "data": true, "artifacts": true}
		for _, e := range entries {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !ignored[e.Name()] {
				seen[e.Name()] = true
			}
		}
	}
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
