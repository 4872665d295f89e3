package module_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/execution"
	"github.com/switchyard/switchyard/domain/module"
)

var now = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

func worker() execution.Transport { return execution.Transport{Type: execution.TransportWorker} }

func httpT(url, sealed string, private bool) execution.Transport {
	return execution.Transport{Type: execution.TransportHTTP, URL: url, SealedSecret: sealed, AllowPrivate: private}
}

func fold(events []domain.Event) module.Module {
	var m module.Module
	for _, e := range events {
		m = m.Evolve(e)
	}
	return m
}

func TestRegisterFillsDefaults(t *testing.T) {
	evs, err := module.DecideRegister(module.Module{}, module.Register{WorkspaceID: "ws", Name: "acme.resize",
		Spec: module.Spec{Transport: worker()}}, now)
	if err != nil {
		t.Fatal(err)
	}
	m := fold(evs)
	if !m.Live() || m.TimeoutMs != module.DefaultTimeoutMs || m.Price != billing.FromWhole(1) || m.Cacheable || m.Version != 1 {
		t.Fatalf("module = %+v", m)
	}
	if tr := m.ExecutionTransport(); tr.Type != execution.TransportWorker {
		t.Fatalf("transport = %+v", tr)
	}
}

func TestRegisterRefusals(t *testing.T) {
	long := strings.Repeat("a", 99) + ".b"
	cases := []struct {
		name  string
		c     module.Register
		field string
	}{
		{"short", module.Register{Name: "a.", Spec: module.Spec{Transport: worker()}}, "name"},
		{"long", module.Register{Name: long, Spec: module.Spec{Transport: worker()}}, "name"},
		{"no dot", module.Register{Name: "acmeresize", Spec: module.Spec{Transport: worker()}}, "name"},
		{"upper", module.Register{Name: "Acme.resize", Spec: module.Spec{Transport: worker()}}, "name"},
		{"reserved", module.Register{Name: "core.mine", Spec: module.Spec{Transport: worker()}}, "name"},
		{"reserved http", module.Register{Name: "http.mine", Spec: module.Spec{Transport: worker()}}, "name"},
		{"timeout low", module.Register{Name: "acme.x", Spec: module.Spec{TimeoutMs: 999, Transport: worker()}}, "timeoutMs"},
		{"timeout high", module.Register{Name: "acme.x", Spec: module.Spec{TimeoutMs: 3_600_001, Transport: worker()}}, "timeoutMs"},
		{"price", module.Register{Name: "acme.x", PriceSet: true, Spec: module.Spec{Price: module.MaxPrice + 1, Transport: worker()}}, "price"},
		{"negative price", module.Register{Name: "acme.x", PriceSet: true, Spec: module.Spec{Price: -1, Transport: worker()}}, "price"},
		{"concurrency", module.Register{Name: "acme.x", Spec: module.Spec{Concurrency: -1, Transport: worker()}}, "concurrency"},
		{"schema", module.Register{Name: "acme.x", Spec: module.Spec{InputSchema: json.RawMessage(`[1]`), Transport: worker()}}, "inputSchema"},
		{"no transport", module.Register{Name: "acme.x"}, "transport.type"},
		{"bad transport", module.Register{Name: "acme.x", Spec: module.Spec{Transport: execution.Transport{Type: "ftp"}}}, "transport.type"},
		{"worker url", module.Register{Name: "acme.x", Spec: module.Spec{Transport: execution.Transport{Type: "worker", URL: "https://x"}}}, "transport"},
		{"no url", module.Register{Name: "acme.x", Spec: module.Spec{Transport: httpT("", "s", false)}}, "transport.url"},
		{"plain http", module.Register{Name: "acme.x", Spec: module.Spec{Transport: httpT("http://example.com/", "s", false)}}, "transport.url"},
		{"relative", module.Register{Name: "acme.x", Spec: module.Spec{Transport: httpT("/x", "s", false)}}, "transport.url"},
		{"credentials", module.Register{Name: "acme.x", Spec: module.Spec{Transport: httpT("https://u:p@example.com/", "s", false)}}, "transport.url"},
		{"no secret", module.Register{Name: "acme.x", Spec: module.Spec{Transport: httpT("https://example.com/", "", false)}}, "transport.secret"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.WorkspaceID = "ws"
			_, err := module.DecideRegister(module.Module{}, tc.c, now)
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("err = %v, want a validation error on %s", err, tc.field)
			}
		})
	}
}

func TestAllowPrivateIsTheOwners(t *testing.T) {
	c := module.Register{WorkspaceID: "ws", Name: "acme.local", Spec: module.Spec{Transport: httpT("http://10.0.0.1/run", "sealed", true)}}
	if _, err := module.DecideRegister(module.Module{}, c, now); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("admin set allowPrivate: err = %v, want forbidden", err)
	}
	c.Owner = true
	evs, err := module.DecideRegister(module.Module{}, c, now)
	if err != nil {
		t.Fatal(err)
	}
	m := fold(evs)
	// An admin may keep it as it is (the secret kept too) ...
	keep := module.Update{WorkspaceID: "ws", Name: "acme.local", Spec: module.Spec{Description: "d", Transport: httpT("http://10.0.0.1/run", "", true)}}
	evs, err = module.DecideUpdate(m, keep, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Evolve(evs[0]); got.Transport.SealedSecret != "sealed" || got.Version != 2 || got.Description != "d" {
		t.Fatalf("after update: %+v", got)
	}
	// ... but not point it elsewhere.
	keep.Spec.Transport.URL = "http://10.0.0.2/run"
	if _, err := module.DecideUpdate(m, keep, now); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("admin moved a private module: err = %v", err)
	}
}

func TestConflictDeleteAndRegisterAgain(t *testing.T) {
	c := module.Register{WorkspaceID: "ws", Name: "acme.x", Spec: module.Spec{Transport: worker()}}
	evs, _ := module.DecideRegister(module.Module{}, c, now)
	m := fold(evs)
	if _, err := module.DecideRegister(m, c, now); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("second register: %v", err)
	}
	if _, err := module.DecideDelete(m, "other", now); !errors.Is(err, module.ErrNotFound) {
		t.Fatalf("delete from another workspace: %v", err)
	}
	evs, err := module.DecideDelete(m, "ws", now)
	if err != nil {
		t.Fatal(err)
	}
	m = m.Evolve(evs[0])
	if m.Live() {
		t.Fatal("deleted module is live")
	}
	if _, err := module.DecideUpdate(m, module.Update(c), now); !errors.Is(err, module.ErrNotFound) || !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("update of deleted: %v", err)
	}
	evs, err = module.DecideRegister(m, c, now)
	if err != nil {
		t.Fatal(err)
	}
	if m = m.Evolve(evs[0]); !m.Live() || m.Version != 1 {
		t.Fatalf("registered again: %+v", m)
	}
}
