package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/internal/testenv"
)

// TestConcurrentCreatesOfOneNameMakeOneWorkflow: names are unique per workspace even when the
// creates race (the reservation holds the name while its workflow is being written).
func TestConcurrentCreatesOfOneNameMakeOneWorkflow(t *testing.T) {
	env := testenv.New(t)
	ws := env.Workspace(t, 1)
	var d workflow.Definition
	if err := json.Unmarshal([]byte(`{"name": "Race", "components": [{"id": "t", "module": "ON_API_CALLED"}]}`), &d); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			// A handler each, as separate serve processes would have.
			_, errs[i] = commands.New(env.Store).CreateWorkflow(context.Background(), commands.CreateWorkflow{WorkspaceID: ws, Definition: d})
		})
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, domain.ErrConflict):
			t.Fatalf("create: %v", err)
		}
	}
	if created != 1 {
		t.Fatalf("%d workflows named Race were created, want 1", created)
	}
}
