package scripts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/testdb"
	"github.com/switchyard/switchyard/testenv"
)

// stubGo stands for the Go toolchain: `go build -o OUT` says it compiles, waits until the test
// creates $STUB_RELEASE (a build as long as the test wants), then writes a stand-in binary at
// OUT that says which command it ran.
const stubGo = `#!/usr/bin/env bash
[ "$1" = build ] || exit 0
echo "stub go: compiling" >&2
while [ ! -e "$STUB_RELEASE" ]; do sleep 0.05; done
cat >"$3" <<'EOF'
#!/usr/bin/env bash
echo "stub switchyard: $*" >&2
if [ "$1 $2" = "admin bootstrap" ]; then echo '{"skipped": true}'; fi
EOF
chmod +x "$3"
`

// TestRunShSaysWhatItIsDoing: a first start spends a minute compiling; scripts/run.sh says so
// before, keeps saying it is still building while it does, and names each later step before
// it runs it. The toolchain and the binary are stand-ins (stubGo); PostgreSQL is the tests'.
func TestRunShSaysWhatItIsDoing(t *testing.T) {
	repo := t.TempDir()
	for _, f := range []string{"scripts/run.sh", "scripts/postgres.sh", "go.mod"} {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stubs := t.TempDir()
	if err := os.WriteFile(filepath.Join(stubs, "go"), []byte(stubGo), 0o755); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(t.TempDir(), "release")
	env := []string{"PATH=" + stubs + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"DATABASE_URL=" + testdb.New(t), "STUB_RELEASE=" + release, "SWITCHYARD_RUN_STILL_EVERY=0.05"}

	r := startRunSh(t, repo, env)
	testenv.Eventually(t, 30*time.Second, "run.sh to say it is still building", func() bool {
		return strings.Contains(r.out.String(), "run.sh: still building")
	})
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatalf("run.sh did not end after the stand-in serve did:\n%s", r.out)
	}
	out := r.out.String()
	if r.err != nil {
		t.Fatalf("run.sh: %v\n%s", r.err, out)
	}
	at := 0
	for _, line := range []string{
		"run.sh: building bin/switchyard: the first build compiles every dependency, about a minute",
		"stub go: compiling",
		"run.sh: still building (",
		"run.sh: built bin/switchyard in ",
		"run.sh: migrating ",
		"stub switchyard: migrate",
		"run.sh: creating the admin user and a first workspace",
		"stub switchyard: admin bootstrap",
		"run.sh: starting: bin/switchyard serve",
		"stub switchyard: serve",
	} {
		i := strings.Index(out[at:], line)
		if i < 0 {
			t.Fatalf("run.sh did not say %q after what came before it:\n%s", line, out)
		}
		at += i + len(line)
	}
	if _, after, _ := strings.Cut(out, "run.sh: built bin/switchyard in "); strings.Contains(after, "still building") {
		t.Fatalf("run.sh went on saying it builds after the build:\n%s", out)
	}
}
