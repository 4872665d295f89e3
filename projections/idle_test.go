package projections_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/eventstore"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/testenv"
)

// Projectors whose events are rare record, while they wait, how far their subscription has
// read the log: their checkpoints reach the head though none of its last events is theirs, so
// a restart, `projections status` and a shutdown's catch-up start there, not at each one's
// last event. An event of theirs after that is applied, by this engine and by the next.
func TestIdleProjectorsRecordHowFarTheyHaveRead(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	eng, stop := e.startEngineWith(t, projections.EngineConfig{IdleCheckpointInterval: 10 * time.Millisecond})
	for i := range 20 { // events no projector reads
		if _, err := e.store.Append(ctx, fmt.Sprint("noise-", i), eventstore.NoStream(),
			eventstore.EventData{ID: uuid.New(), Type: "NoiseMade", Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	head, err := e.store.HeadPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	atHead := func(eng *projections.Engine) func() bool {
		return func() bool {
			st, err := eng.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range st {
				if s.Position.Less(head) {
					return false
				}
			}
			return len(st) > 0
		}
	}
	testenv.Eventually(t, 30*time.Second, "every checkpoint at the log's head", atHead(eng))

	register := func(email string) {
		t.Helper()
		if _, err := e.cmds.Identity.RegisterUser(ctx, commands.RegisterUser{Email: email, Password: "password-123"}); err != nil {
			t.Fatal(err)
		}
	}
	register("after-idle@example.com")
	e.caughtUp(t, eng)
	if _, err := e.q.UserByEmail(ctx, "after-idle@example.com"); err != nil {
		t.Fatalf("a user registered after the idle checkpoints: %v", err)
	}
	stop()
	register("after-restart@example.com")
	eng, _ = e.startEngineWith(t, projections.EngineConfig{IdleCheckpointInterval: 10 * time.Millisecond})
	e.caughtUp(t, eng)
	if _, err := e.q.UserByEmail(ctx, "after-restart@example.com"); err != nil {
		t.Fatalf("a user registered while no engine ran: %v", err)
	}
}
