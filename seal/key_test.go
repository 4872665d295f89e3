package seal

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// logged returns every entry the hook saw, formatted as the logger would write it.
func logged(hook *test.Hook) string {
	var b strings.Builder
	for _, e := range hook.AllEntries() {
		s, _ := e.String()
		b.WriteString(s)
	}
	return b.String()
}

func newLogger() (*logrus.Logger, *test.Hook) {
	logger, hook := test.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	return logger, hook
}

func assertNoKeyMaterial(t *testing.T, hook *test.Hook, key []byte) {
	t.Helper()
	for _, e := range hook.AllEntries() {
		s, err := e.String()
		if err != nil {
			t.Fatal(err)
		}
		for _, form := range []string{EncodeKey(key), strings.TrimRight(EncodeKey(key), "="), b64.EncodeToString(key)} {
			if strings.Contains(s, form) {
				t.Fatalf("log entry contains key material: %s", s)
			}
		}
	}
}

func TestLoadOrCreateKeyFromEnv(t *testing.T) {
	key := mustKey(t)
	dir := filepath.Join(t.TempDir(), "data")
	logger, hook := newLogger()
	got, err := LoadOrCreateKey(dir, EncodeKey(key)+"\n", logger)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, key) {
		t.Fatal("key from the environment not returned")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data directory touched when the key comes from the environment: %v", err)
	}
	if len(hook.AllEntries()) != 0 {
		t.Fatalf("unexpected log entries: %v", hook.AllEntries())
	}
}

func TestLoadOrCreateKeyBadEnv(t *testing.T) {
	logger, _ := newLogger()
	for _, value := range []string{"not-base64!", EncodeKey(make([]byte, 16))} {
		_, err := LoadOrCreateKey(t.TempDir(), value, logger)
		if err == nil || !strings.Contains(err.Error(), "SWITCHYARD_SECRET_KEY") {
			t.Fatalf("LoadOrCreateKey(%q) error = %v, want one naming SWITCHYARD_SECRET_KEY", value, err)
		}
		if strings.Contains(err.Error(), value) {
			t.Fatalf("error repeats the key: %v", err)
		}
	}
}

func TestLoadOrCreateKeyCreatesFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "data")
	logger, hook := newLogger()
	key, err := LoadOrCreateKey(dir, "", logger)
	if err != nil {
		t.Fatal(err)
	}
	if len(key) != KeySize {
		t.Fatalf("key is %d bytes", len(key))
	}
	path := filepath.Join(dir, KeyFileName)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", perm)
	}
	dinfo, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := dinfo.Mode().Perm(); perm != 0o700 {
		t.Fatalf("data directory mode %04o, want 0700", perm)
	}
	text, _ := os.ReadFile(path)
	if fromFile, err := DecodeKey(string(text)); err != nil || !bytes.Equal(fromFile, key) {
		t.Fatalf("file does not hold the returned key: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("data directory holds %d entries, want only %s (temporary file left behind?)", len(entries), KeyFileName)
	}

	warn := hook.LastEntry()
	if warn == nil || warn.Level != logrus.WarnLevel || !strings.Contains(warn.Message, "SWITCHYARD_SECRET_KEY") ||
		!strings.Contains(warn.Message, "generated") {
		t.Fatalf("want a warning naming SWITCHYARD_SECRET_KEY, got %+v", hook.AllEntries())
	}
	if warn.Data["kid"] != KeyID(key) || warn.Data["path"] != path {
		t.Fatalf("warning fields = %v", warn.Data)
	}
	assertNoKeyMaterial(t, hook, key)

	// A second start reuses the file and still warns.
	hook.Reset()
	again, err := LoadOrCreateKey(dir, "", logger)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, key) {
		t.Fatal("second load generated a different key instead of reusing the file")
	}
	if e := hook.LastEntry(); e == nil || e.Level != logrus.WarnLevel || !strings.Contains(e.Message, "SWITCHYARD_SECRET_KEY") {
		t.Fatalf("reusing a generated key must warn, got %+v", hook.AllEntries())
	}
	assertNoKeyMaterial(t, hook, key)

	// The environment wins over the file.
	envKey := mustKey(t)
	got, err := LoadOrCreateKey(dir, EncodeKey(envKey), logger)
	if err != nil || !bytes.Equal(got, envKey) {
		t.Fatalf("env key not preferred: %v", err)
	}
}

func TestLoadOrCreateKeyExistingDirKeepsMode(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logger, _ := newLogger()
	if _, err := LoadOrCreateKey(dir, "", logger); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(filepath.Join(dir, KeyFileName))
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", perm)
	}
}

func TestLoadOrCreateKeyConcurrentStartsAgree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	logger, _ := newLogger()
	const n = 8
	keys := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { keys[i], errs[i] = LoadOrCreateKey(dir, "", logger) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatal("concurrent first starts generated different keys")
		}
	}
}

func TestLoadOrCreateKeyBadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, KeyFileName)
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logger, _ := newLogger()
	_, err := LoadOrCreateKey(dir, "", logger)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("corrupt key file: error = %v, want one naming %s", err, path)
	}
	// The bad file is never replaced: doing so would orphan every secret sealed with it.
	if text, _ := os.ReadFile(path); string(text) != "short\n" {
		t.Fatal("corrupt key file was overwritten")
	}
}

func TestLoadOrCreateKeyWarnsOnLoosePermissions(t *testing.T) {
	dir := t.TempDir()
	key := mustKey(t)
	path := filepath.Join(dir, KeyFileName)
	if err := os.WriteFile(path, []byte(EncodeKey(key)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	logger, hook := newLogger()
	got, err := LoadOrCreateKey(dir, "", logger)
	if err != nil || !bytes.Equal(got, key) {
		t.Fatalf("LoadOrCreateKey = %v", err)
	}
	if !strings.Contains(logged(hook), "chmod 600") {
		t.Fatalf("no warning about a world-readable key file: %s", logged(hook))
	}
	assertNoKeyMaterial(t, hook, key)
}

func TestLoadOrCreateKeyNeedsDataDir(t *testing.T) {
	_, err := LoadOrCreateKey("", "", nil)
	if err == nil || !strings.Contains(err.Error(), "SWITCHYARD_SECRET_KEY") {
		t.Fatalf("error = %v", err)
	}
}
