package commands_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/seal"
	"github.com/switchyard/switchyard/testenv"
)

func notifyDefinition(name string, n *workflow.Notify) workflow.Definition {
	return workflow.Definition{Name: name, Notify: n,
		Components: []workflow.Component{{ID: "t", Module: workflow.ModuleTrigger}}}
}

// A definition's notify secret and header values enter the log sealed, bound to their field,
// and the view shows only the URL, signed and the header names; a bad notify is refused
// naming the field, before anything is appended.
func TestWorkflowNotifyIsSealed(t *testing.T) {
	env := testenv.New(t)
	key, _ := seal.GenerateKey()
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	h := commands.New(env.Store, commands.WithSealer(sealer))
	ws := env.Workspace(t, 10)
	ctx := context.Background()
	st, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: notifyDefinition("sealed",
		&workflow.Notify{URL: "https://example.com/runs", Secret: "whsec_n", Headers: map[string]string{"X-B": "bee", "X-A": "ay"}})})
	if err != nil {
		t.Fatal(err)
	}
	events, err := env.Store.ReadStream(ctx, commands.WorkflowStream(st.ID), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if s := string(e.Data); strings.Contains(s, "whsec_n") || strings.Contains(s, "bee") {
			t.Fatalf("a clear notify value in %s: %s", e.Type, s)
		}
	}
	n := st.Definition.Notify
	if plain, err := sealer.Open(n.SealedSecret, commands.NotifySecretAAD); err != nil || string(plain) != "whsec_n" {
		t.Fatalf("the sealed secret opens to %q, %v", plain, err)
	}
	if _, err := sealer.Open(n.SealedSecret, []byte("callbackSecret")); err == nil {
		t.Fatal("the notify secret opens as an execution's callback secret")
	}
	if v := st.View().Notify; v == nil || v.URL != "https://example.com/runs" || !v.Signed || strings.Join(v.HeaderNames, ",") != "X-A,X-B" {
		t.Fatalf("view %+v", v)
	}

	for _, tc := range []struct {
		notify *workflow.Notify
		field  string
	}{
		{&workflow.Notify{URL: "http://example.com/runs"}, "notify.url"},
		{&workflow.Notify{Secret: "s"}, "notify.url"},
		{&workflow.Notify{URL: "https://user:pw@example.com/runs"}, "notify.url"},
		{&workflow.Notify{URL: "https://example.com/runs", Headers: map[string]string{"x-signature": "forged"}}, "notify.headers.x-signature"},
		{&workflow.Notify{URL: "https://example.com/runs", Secret: strings.Repeat("s", commands.MaxCallbackSecret+1)}, "notify.secret"},
		{&workflow.Notify{URL: "https://example.com/runs", SealedSecret: n.SealedSecret}, "notify"},
	} {
		_, err := h.Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws, Definition: notifyDefinition("bad", tc.notify)})
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Fatalf("notify %+v: %v, want a 400 naming %s", tc.notify, err, tc.field)
		}
	}
	if _, err := commands.New(env.Store).Workflows.CreateWorkflow(ctx, commands.CreateWorkflow{WorkspaceID: ws,
		Definition: notifyDefinition("unsealed", &workflow.Notify{URL: "https://example.com/runs", Secret: "s"})}); err == nil {
		t.Fatal("a handler without a sealer stored a notify secret")
	}
}
