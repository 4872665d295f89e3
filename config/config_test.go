package config

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/switchyard/switchyard/seal"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the table in docs/configuration.md from Vars")

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func testKey(t *testing.T) string {
	t.Helper()
	k, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return seal.EncodeKey(k)
}

func TestDefaults(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatalf("defaults do not load: %v", err)
	}
	want := Config{
		DatabaseURL:         "postgres://postgres@127.0.0.1:5432/switchyard?sslmode=disable",
		EventStore:          EventStorePostgres,
		Listen:              ":8080",
		BaseURL:             "http://localhost:8080",
		DataDir:             "./data",
		LogFormat:           LogFormatText,
		LogLevel:            logrus.InfoLevel,
		ExecutorConcurrency: 64,
		ExecutorShare:       50,
		CacheWindow:         10 * time.Minute,
		RateLimit:           50,
		RateBurst:           100,
		HookRateLimit:       10,
		HookRateBurst:       50,
		MaxStreamsPerKey:    100,
		SSEHeartbeat:        15 * time.Second,
		TaskLease:           30 * time.Second,
		MaxBodyBytes:        1 << 20,
		ShutdownTimeout:     30 * time.Second,
		ReadTimeout:         30 * time.Second,
		PasswordChecks:      4,
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
	// Blank values count as unset.
	blank, err := Load(func(string) string { return "  " })
	if err != nil || !reflect.DeepEqual(blank, want) {
		t.Fatalf("blank values: %+v, %v", blank, err)
	}
}

func TestEveryVarHasADefaultThatLoads(t *testing.T) {
	// Every default in the table must itself be valid (checked by loading it explicitly).
	kv := map[string]string{}
	for _, v := range Vars {
		kv[v.Name] = v.Default
	}
	if _, err := Load(env(kv)); err != nil {
		t.Fatal(err)
	}
}

func TestValidValues(t *testing.T) {
	key, old1, old2 := testKey(t), testKey(t), testKey(t)
	for _, tc := range []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c Config)
	}{
		{"kurrentdb", map[string]string{EnvEventStore: "KurrentDB", EnvKurrentDBURL: "esdb://admin:changeit@localhost:2113?tls=false"},
			func(t *testing.T, c Config) {
				if c.EventStore != EventStoreKurrentDB || c.KurrentDBURL != "esdb://admin:changeit@localhost:2113?tls=false" {
					t.Fatalf("%+v", c)
				}
			}},
		{"kurrentdb discover", map[string]string{EnvEventStore: "kurrentdb", EnvKurrentDBURL: "esdb+discover://cluster.example:2113"},
			func(t *testing.T, c Config) {
				if c.KurrentDBURL != "esdb+discover://cluster.example:2113" {
					t.Fatal(c.KurrentDBURL)
				}
			}},
		{"kurrent url ignored for postgres", map[string]string{EnvKurrentDBURL: "not a url"},
			func(t *testing.T, c Config) {
				if c.KurrentDBURL != "" {
					t.Fatal("KURRENTDB_URL kept while the event store is postgres")
				}
			}},
		{"database key=value", map[string]string{EnvDatabaseURL: "host=db user=sy dbname=switchyard sslmode=require"},
			func(t *testing.T, c Config) {
				if c.DatabaseURL != "host=db user=sy dbname=switchyard sslmode=require" {
					t.Fatal(c.DatabaseURL)
				}
			}},
		{"database postgresql scheme", map[string]string{EnvDatabaseURL: " postgresql://u:p@db/x "},
			func(t *testing.T, c Config) {
				if c.DatabaseURL != "postgresql://u:p@db/x" {
					t.Fatal(c.DatabaseURL)
				}
			}},
		{"listen with host", map[string]string{EnvListen: "127.0.0.1:9090"},
			func(t *testing.T, c Config) {
				if c.Listen != "127.0.0.1:9090" {
					t.Fatal(c.Listen)
				}
			}},
		{"listen ipv6", map[string]string{EnvListen: "[::1]:0"},
			func(t *testing.T, c Config) {
				if c.Listen != "[::1]:0" {
					t.Fatal(c.Listen)
				}
			}},
		{"base url trailing slashes removed", map[string]string{EnvBaseURL: "https://switchyard.example.com//"},
			func(t *testing.T, c Config) {
				if c.BaseURL != "https://switchyard.example.com" {
					t.Fatal(c.BaseURL)
				}
			}},
		{"base url with path", map[string]string{EnvBaseURL: "https://example.com/switchyard/"},
			func(t *testing.T, c Config) {
				if c.BaseURL != "https://example.com/switchyard" {
					t.Fatal(c.BaseURL)
				}
			}},
		{"secret keys", map[string]string{EnvSecretKey: key, EnvPreviousSecretKeys: old1 + ", " + old2},
			func(t *testing.T, c Config) {
				if c.SecretKey.Reveal() != key || len(c.PreviousSecretKeys) != 2 ||
					c.PreviousSecretKeys[0].Reveal() != old1 || c.PreviousSecretKeys[1].Reveal() != old2 {
					t.Fatalf("keys not kept")
				}
			}},
		{"log json debug", map[string]string{EnvLogFormat: "JSON", EnvLogLevel: "debug"},
			func(t *testing.T, c Config) {
				if c.LogFormat != LogFormatJSON || c.LogLevel != logrus.DebugLevel {
					t.Fatalf("%v %v", c.LogFormat, c.LogLevel)
				}
			}},
		{"log level warning", map[string]string{EnvLogLevel: "warning"},
			func(t *testing.T, c Config) {
				if c.LogLevel != logrus.WarnLevel {
					t.Fatal(c.LogLevel)
				}
			}},
		{"numbers", map[string]string{EnvExecutorConcurrency: "8", EnvRateLimit: "2.5", EnvRateBurst: "1_000"},
			func(t *testing.T, c Config) {
				if c.ExecutorConcurrency != 8 || c.RateLimit != 2.5 || c.RateBurst != 1000 {
					t.Fatalf("%d %v %d", c.ExecutorConcurrency, c.RateLimit, c.RateBurst)
				}
			}},
		{"durations", map[string]string{EnvCacheWindow: "0", EnvSSEHeartbeat: "250ms", EnvShutdownTimeout: "1m30s"},
			func(t *testing.T, c Config) {
				if c.CacheWindow != 0 || c.SSEHeartbeat != 250*time.Millisecond || c.ShutdownTimeout != 90*time.Second {
					t.Fatalf("%v %v %v", c.CacheWindow, c.SSEHeartbeat, c.ShutdownTimeout)
				}
			}},
		{"bool yes", map[string]string{EnvWebhookAllowPrivate: "Yes"},
			func(t *testing.T, c Config) {
				if !c.WebhookAllowPrivate {
					t.Fatal("not true")
				}
			}},
		{"bool 0", map[string]string{EnvWebhookAllowPrivate: "0"},
			func(t *testing.T, c Config) {
				if c.WebhookAllowPrivate {
					t.Fatal("not false")
				}
			}},
		{"size plain bytes", map[string]string{EnvMaxBodyBytes: "65536"},
			func(t *testing.T, c Config) {
				if c.MaxBodyBytes != 65536 {
					t.Fatal(c.MaxBodyBytes)
				}
			}},
		{"size KB", map[string]string{EnvMaxBodyBytes: "512 KB"},
			func(t *testing.T, c Config) {
				if c.MaxBodyBytes != 512000 {
					t.Fatal(c.MaxBodyBytes)
				}
			}},
		{"size GiB", map[string]string{EnvMaxBodyBytes: "2gib"},
			func(t *testing.T, c Config) {
				if c.MaxBodyBytes != 2<<30 {
					t.Fatal(c.MaxBodyBytes)
				}
			}},
		{"data dir", map[string]string{EnvDataDir: "/var/lib/switchyard"},
			func(t *testing.T, c Config) {
				if c.DataDir != "/var/lib/switchyard" {
					t.Fatal(c.DataDir)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestInvalidValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    map[string]string
		varErr string // the variable the error must name
		text   string // and a phrase it must contain
	}{
		{"database scheme", map[string]string{EnvDatabaseURL: "mysql://u:p@h/db"}, EnvDatabaseURL, `scheme "mysql"`},
		{"database garbage", map[string]string{EnvDatabaseURL: "localhost"}, EnvDatabaseURL, "not a PostgreSQL URL"},
		{"database bad url", map[string]string{EnvDatabaseURL: "postgres://u:p@h:badport/db"}, EnvDatabaseURL, "not a valid URL"},
		{"event store", map[string]string{EnvEventStore: "mongodb"}, EnvEventStore, "postgres, kurrentdb"},
		{"kurrent url missing", map[string]string{EnvEventStore: "kurrentdb"}, EnvKurrentDBURL, "required when SWITCHYARD_EVENT_STORE=kurrentdb"},
		{"kurrent url scheme", map[string]string{EnvEventStore: "kurrentdb", EnvKurrentDBURL: "http://localhost:2113"}, EnvKurrentDBURL, "esdb://"},
		{"listen no port", map[string]string{EnvListen: "8080"}, EnvListen, "not host:port"},
		{"listen bad port", map[string]string{EnvListen: ":http"}, EnvListen, "not a number"},
		{"listen port range", map[string]string{EnvListen: ":70000"}, EnvListen, "0 to 65535"},
		{"base url scheme", map[string]string{EnvBaseURL: "ftp://example.com"}, EnvBaseURL, "http:// or https://"},
		{"base url no scheme", map[string]string{EnvBaseURL: "example.com"}, EnvBaseURL, "http:// or https://"},
		{"base url no host", map[string]string{EnvBaseURL: "https://"}, EnvBaseURL, "no host"},
		{"base url query", map[string]string{EnvBaseURL: "https://example.com?x=1"}, EnvBaseURL, "query or fragment"},
		{"base url userinfo", map[string]string{EnvBaseURL: "https://u:p@example.com"}, EnvBaseURL, "user name or password"},
		{"secret key short", map[string]string{EnvSecretKey: seal.EncodeKey(make([]byte, 16))}, EnvSecretKey, "16 bytes, want 32"},
		{"secret key not base64", map[string]string{EnvSecretKey: "correct horse battery staple"}, EnvSecretKey, "not valid base64"},
		{"previous key bad", map[string]string{EnvPreviousSecretKeys: seal.EncodeKey(make([]byte, 32)) + ",short"}, EnvPreviousSecretKeys, "key 2"},
		{"log format", map[string]string{EnvLogFormat: "xml"}, EnvLogFormat, "text, json"},
		{"log level", map[string]string{EnvLogLevel: "verbose"}, EnvLogLevel, "trace, debug"},
		{"concurrency zero", map[string]string{EnvExecutorConcurrency: "0"}, EnvExecutorConcurrency, "out of range"},
		{"concurrency text", map[string]string{EnvExecutorConcurrency: "lots"}, EnvExecutorConcurrency, "not a whole number"},
		{"cache window negative", map[string]string{EnvCacheWindow: "-1m"}, EnvCacheWindow, "negative"},
		{"cache window no unit", map[string]string{EnvCacheWindow: "600"}, EnvCacheWindow, "no unit"},
		{"cache window text", map[string]string{EnvCacheWindow: "ten minutes"}, EnvCacheWindow, "not a duration"},
		{"rate limit zero", map[string]string{EnvRateLimit: "0"}, EnvRateLimit, "greater than 0"},
		{"rate limit NaN", map[string]string{EnvRateLimit: "NaN"}, EnvRateLimit, "not a number"},
		{"rate limit inf", map[string]string{EnvRateLimit: "+Inf"}, EnvRateLimit, "not a number"},
		{"rate burst negative", map[string]string{EnvRateBurst: "-5"}, EnvRateBurst, "out of range"},
		{"hook rate burst zero", map[string]string{EnvHookRateBurst: "0"}, EnvHookRateBurst, "out of range"},
		{"no streams per key", map[string]string{EnvMaxStreamsPerKey: "0"}, EnvMaxStreamsPerKey, "out of range"},
		{"bool", map[string]string{EnvWebhookAllowPrivate: "maybe"}, EnvWebhookAllowPrivate, "not a boolean"},
		{"ca file missing", map[string]string{EnvWebhookCAFile: "/nonexistent/ca.pem"}, EnvWebhookCAFile, "no such file"},
		{"heartbeat zero", map[string]string{EnvSSEHeartbeat: "0s"}, EnvSSEHeartbeat, "greater than 0"},
		{"shutdown negative", map[string]string{EnvShutdownTimeout: "-1s"}, EnvShutdownTimeout, "negative"},
		{"read timeout zero", map[string]string{EnvReadTimeout: "0"}, EnvReadTimeout, "greater than 0"},
		{"password checks zero", map[string]string{EnvPasswordChecks: "0"}, EnvPasswordChecks, "out of range"},
		{"body size zero", map[string]string{EnvMaxBodyBytes: "0"}, EnvMaxBodyBytes, "greater than 0"},
		{"body size unit", map[string]string{EnvMaxBodyBytes: "1 TB"}, EnvMaxBodyBytes, "not a size"},
		{"body size overflow", map[string]string{EnvMaxBodyBytes: "9223372036854775807GiB"}, EnvMaxBodyBytes, "not a size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(env(tc.env))
			if err == nil {
				t.Fatal("Load accepted invalid configuration")
			}
			var es Errors
			if !errors.As(err, &es) || len(es) != 1 {
				t.Fatalf("want exactly one error, got %v", err)
			}
			var e *Error
			if !errors.As(err, &e) || e.Var != tc.varErr {
				t.Fatalf("error %v does not name %s", err, tc.varErr)
			}
			if !strings.Contains(err.Error(), tc.varErr+": ") || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %q lacks %q", err, tc.text)
			}
		})
	}
}

func TestAllErrorsReportedAtOnce(t *testing.T) {
	_, err := Load(env(map[string]string{
		EnvListen:       "nope",
		EnvLogLevel:     "loud",
		EnvRateBurst:    "x",
		EnvSSEHeartbeat: "often",
	}))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("err = %v", err)
	}
	got := make([]string, len(es))
	for i, e := range es {
		got[i] = e.Var
	}
	want := []string{EnvListen, EnvLogLevel, EnvRateBurst, EnvSSEHeartbeat}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("errors name %v, want %v", got, want)
	}
	if !strings.HasPrefix(err.Error(), "invalid configuration:\n  SWITCHYARD_LISTEN: ") {
		t.Fatalf("message: %q", err)
	}
}

func TestErrorsNeverRepeatSecrets(t *testing.T) {
	const password = "s3cr3t-passw0rd"
	short := seal.EncodeKey(bytes.Repeat([]byte{7}, 16))
	_, err := Load(env(map[string]string{
		EnvDatabaseURL:        "postgres://user:" + password + "@h:bad/db",
		EnvEventStore:         "kurrentdb",
		EnvKurrentDBURL:       "http://admin:" + password + "@h:2113",
		EnvSecretKey:          short,
		EnvPreviousSecretKeys: short,
	}))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, s := range []string{password, short} {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("error repeats a secret: %v", err)
		}
	}
}

func TestSecretNeverPrints(t *testing.T) {
	key := testKey(t)
	c, err := Load(env(map[string]string{EnvSecretKey: key, EnvPreviousSecretKeys: key}))
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprint(c.SecretKey), string(js)} {
		if strings.Contains(out, key) {
			t.Fatalf("secret key printed: %s", out)
		}
	}
	if !strings.Contains(fmt.Sprintf("%+v", c), "[redacted]") {
		t.Fatal("a set secret should print as [redacted]")
	}
	if Secret("").String() != "" {
		t.Fatal("an empty secret should print empty")
	}
}

func TestLogFieldsRedact(t *testing.T) {
	c, err := Load(env(map[string]string{
		EnvDatabaseURL:  "postgres://sy:hunter2@db:5432/switchyard",
		EnvEventStore:   "kurrentdb",
		EnvKurrentDBURL: "esdb://admin:changeit@kdb:2113?tls=false",
		EnvSecretKey:    testKey(t),
	}))
	if err != nil {
		t.Fatal(err)
	}
	f := c.LogFields()
	out := fmt.Sprint(f)
	for _, s := range []string{"hunter2", "changeit", c.SecretKey.Reveal()} {
		if strings.Contains(out, s) {
			t.Fatalf("LogFields leaks %q: %s", s, out)
		}
	}
	if f["secretKeySet"] != true || f["database"] != "postgres://sy:xxxxx@db:5432/switchyard" {
		t.Fatalf("fields: %v", f)
	}
	if got := redactDSN("host=db password=hunter2 user=sy"); got != "host=db password=xxxxx user=sy" {
		t.Fatal(got)
	}
}

func TestWebhookCAFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(good, selfSignedPEM(t), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(env(map[string]string{EnvWebhookCAFile: good}))
	if err != nil {
		t.Fatal(err)
	}
	if c.WebhookCAFile != good || c.WebhookCAs == nil {
		t.Fatalf("CA file not loaded: %q %v", c.WebhookCAFile, c.WebhookCAs)
	}

	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(env(map[string]string{EnvWebhookCAFile: bad}))
	if err == nil || !strings.Contains(err.Error(), EnvWebhookCAFile+": "+bad+" holds no PEM certificate") {
		t.Fatalf("bad CA file: %v", err)
	}
}

func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "switchyard test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestSealer(t *testing.T) {
	oldKey, newKey := testKey(t), testKey(t)
	dir := t.TempDir()
	logger, hook := test.NewNullLogger()

	before, err := Load(env(map[string]string{EnvSecretKey: oldKey, EnvDataDir: dir}))
	if err != nil {
		t.Fatal(err)
	}
	s1, err := before.Sealer(logger)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s1.Seal([]byte("callback secret"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}

	after, err := Load(env(map[string]string{EnvSecretKey: newKey, EnvPreviousSecretKeys: oldKey, EnvDataDir: dir}))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := after.Sealer(logger)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s2.Open(sealed, []byte("ad")); err != nil || string(got) != "callback secret" {
		t.Fatalf("open after rotation: %q, %v", got, err)
	}
	if len(hook.AllEntries()) != 0 {
		t.Fatal("a configured key must not log a warning")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatal("a configured key must not create a key file")
	}

	// Without a key, the data directory's generated key is used, with a warning.
	local, err := Load(env(map[string]string{EnvDataDir: filepath.Join(dir, "data")}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := local.Sealer(logger); err != nil {
		t.Fatal(err)
	}
	if e := hook.LastEntry(); e == nil || e.Level != logrus.WarnLevel {
		t.Fatal("no warning for a generated key")
	}
	if _, err := os.Stat(filepath.Join(dir, "data", seal.KeyFileName)); err != nil {
		t.Fatal(err)
	}
}

func TestNewLogger(t *testing.T) {
	c, err := Load(env(map[string]string{EnvLogFormat: "json", EnvLogLevel: "warn"}))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	logger := c.NewLogger(&buf)
	logger.Info("hidden")
	logger.WithField("k", "v").Warn("shown")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q", buf.String())
	}
	if line["msg"] != "shown" || line["k"] != "v" || line["level"] != "warning" {
		t.Fatalf("line: %v", line)
	}
}

func TestUnknownVars(t *testing.T) {
	got := UnknownVars([]string{
		"PATH=/usr/bin", "SWITCHYARD_LISTEN=:1", "SWITCHYARD_LISTN=:2", "SWITCHYARD_PG_PORT=1",
		"SWITCHYARD_TEST_BROWSER=0", "DATABASE_URL=x", "SWITCHYARD_SECRETKEY=x",
	})
	if !reflect.DeepEqual(got, []string{"SWITCHYARD_LISTN", "SWITCHYARD_SECRETKEY"}) {
		t.Fatal(got)
	}
}

func TestUsageListsEveryVar(t *testing.T) {
	u := Usage()
	for _, v := range Vars {
		if !strings.Contains(u, "\n  "+v.Name+"\n") {
			t.Fatalf("Usage lacks %s", v.Name)
		}
		if v.Default != "" && !strings.Contains(u, "default: "+v.Default+"\n") {
			t.Fatalf("Usage lacks the default of %s", v.Name)
		}
	}
	for _, line := range strings.Split(u, "\n") {
		if len(line) > 80 && !strings.Contains(line, "default: ") {
			t.Fatalf("Usage line longer than 80 columns: %q", line)
		}
	}
	seen := map[string]bool{}
	for _, v := range Vars {
		if seen[v.Name] || v.Description == "" {
			t.Fatalf("Vars: %s is listed twice or undescribed", v.Name)
		}
		seen[v.Name] = true
	}
}

const (
	docsPath   = "../docs/configuration.md"
	beginTable = "<!-- BEGIN config.Vars: generated by `go test ./config -update-docs`; do not edit -->\n"
	endTable   = "<!-- END config.Vars -->"
)

// TestDocsMatchVars keeps docs/configuration.md in step with Vars. After changing Vars, run
// go test ./config -run TestDocsMatchVars -update-docs.
func TestDocsMatchVars(t *testing.T) {
	doc, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatalf("read %s: %v", docsPath, err)
	}
	text := string(doc)
	i, j := strings.Index(text, beginTable), strings.Index(text, endTable)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q and %q around the table", docsPath, beginTable, endTable)
	}
	want := text[:i+len(beginTable)] + Markdown() + text[j:]
	if want == text {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(docsPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the table in %s differs from config.Vars; run: go test ./config -run TestDocsMatchVars -update-docs", docsPath)
}
