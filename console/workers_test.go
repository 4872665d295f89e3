package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/console"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/testenv"
)

// The workers page lists the workers the task board saw, and says so when there are none.
func TestWorkersPage(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	c := s.client(t, s.member)
	path := "/workspaces/" + s.ws + "/workers"
	if st, body := s.get(t, c, path); st != http.StatusOK || !strings.Contains(body, `id="no-workers"`) {
		t.Fatalf("no workers: %d\n%s", st, body)
	}
	s.workers.Store(&[]console.Worker{{ID: "host-1/42", Modules: []string{"acme.resize", "acme.crop"}, InFlight: 3, LastPoll: time.Now()}})
	st, body := s.get(t, c, path)
	if st != http.StatusOK || !strings.Contains(body, "host-1/42") || !strings.Contains(body, "acme.crop") ||
		!strings.Contains(body, `data-label="Tasks in flight">3<`) || !strings.Contains(body, `id="nav-workers"`) {
		t.Fatalf("workers page: %d\n%s", st, body)
	}
}

// An execution's page names the worker of each attempt.
func TestExecutionPageNamesTheWorkerOfEachAttempt(t *testing.T) {
	s := newStack(t)
	s.seedPeople(t)
	if _, err := s.env.Cmds.Billing.TopUp(context.Background(), s.ws, billing.FromWhole(10), "credit"); err != nil {
		t.Fatal(err)
	}
	id := s.callbackExecution(t)
	testenv.Eventually(t, 30*time.Second, "the execution to end", func() bool {
		st, err := s.env.Cmds.Executions.Execution(context.Background(), id)
		return err == nil && st.Status.Terminal()
	})
	runs, err := s.env.Cmds.Executions.ExecutionAttempts(context.Background(), id)
	if err != nil || len(runs) == 0 || runs[0].Worker == "" {
		t.Fatalf("attempts: %+v %v", runs, err)
	}
	st, body := s.get(t, s.client(t, s.member), "/workspaces/"+s.ws+"/executions/"+id)
	if st != http.StatusOK || !strings.Contains(body, `data-label="Worker" class="mono">`+runs[0].Worker+`<`) {
		t.Fatalf("execution page (worker %s): %d\n%s", runs[0].Worker, st, body)
	}
}
