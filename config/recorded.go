package config

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DatabaseFile is where scripts/postgres.sh records a checkout's database, relative to the
// checkout: the first start of scripts/run.sh chooses a server (127.0.0.1:5432 or a private
// cluster) and writes the choice here, so that every later start and the CLI use the same
// database until `scripts/postgres.sh forget` removes the file.
const DatabaseFile = ".data/database.env"

// RecordedDatabase returns the DATABASE_URL recorded in the first of dirs that holds a
// DatabaseFile, and that file's path; ok is false when none does. A file that exists but holds
// no DATABASE_URL line is an error: silently using another database is what the record prevents.
func RecordedDatabase(dirs ...string) (databaseURL, path string, ok bool, err error) {
	for _, dir := range dirs {
		path = filepath.Join(dir, DatabaseFile)
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", path, false, fmt.Errorf("read %s: %w", path, err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, found := strings.CutPrefix(strings.TrimSpace(sc.Text()), EnvDatabaseURL+"="); found && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v), path, true, nil
			}
		}
		if err := sc.Err(); err != nil {
			return "", path, false, fmt.Errorf("read %s: %w", path, err)
		}
		return "", path, false, fmt.Errorf("%s has no %s= line; delete it (bash scripts/postgres.sh forget) or set %s",
			path, EnvDatabaseURL, EnvDatabaseURL)
	}
	return "", "", false, nil
}

// checkoutDirs are where the CLI looks for a checkout's DatabaseFile: the working directory
// (`bin/switchyard ...` run from the checkout, as the docs show) and the directory above the
// binary's own (bin/switchyard run from elsewhere).
func checkoutDirs() []string {
	var dirs []string
	if wd, err := os.Getwd(); err == nil {
		dirs = append(dirs, wd)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		if up := filepath.Dir(filepath.Dir(exe)); len(dirs) == 0 || up != dirs[0] {
			dirs = append(dirs, up)
		}
	}
	return dirs
}

// withDatabaseURL returns getenv with DATABASE_URL answered by url.
func withDatabaseURL(getenv func(string) string, url string) func(string) string {
	return func(name string) string {
		if name == EnvDatabaseURL {
			return url
		}
		return getenv(name)
	}
}

// RedactDSN is a database URL or key=value string with its password removed, for messages.
func RedactDSN(dsn string) string { return redactDSN(dsn) }
