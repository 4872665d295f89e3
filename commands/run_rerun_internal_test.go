package commands

import (
	"encoding/json"
	"testing"

	"github.com/switchyard/switchyard/domain/run"
	"github.com/switchyard/switchyard/domain/workflow"
	"github.com/switchyard/switchyard/modules"
)

// A re-run's balance check covers the module stages it runs, not those it copies: a workspace
// that can pay for the restarted stage is not refused for the whole pass.
func TestRerunCostLeavesOutTheCopiedStages(t *testing.T) {
	var def workflow.Definition
	if err := json.Unmarshal([]byte(`{"name": "r", "components": [
		{"id": "t", "module": "ON_API_CALLED"},
		{"id": "a", "module": "core.echo"},
		{"id": "b", "module": "core.echo"},
		{"id": "each", "module": "FOR_EACH", "config": {"items": "items"}},
		{"id": "work", "module": "core.echo"}],
	  "edges": [{"from": "t", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "each"}, {"from": "each", "to": "work"}]}`), &def); err != nil {
		t.Fatal(err)
	}
	mods := modules.Builtins(modules.BuiltinsConfig{})
	ev := run.Triggered{Definition: def, Reused: []run.Reuse{
		{ComponentID: "a", Iteration: run.NoIteration},
		{ComponentID: "work", Loop: "each", Iteration: 0}, // one iteration copied: the loop still runs
	}}
	if got, whole := rerunCost(registryPrice(mods), ev), passCost(registryPrice(mods), def); whole != 3000 || got != 2000 {
		t.Fatalf("re-run cost %d of a pass of %d, want 2000 of 3000", got, whole)
	}
	if len(def.Components) != 5 {
		t.Fatalf("rerunCost changed the definition: %d components", len(def.Components))
	}
}

// registryPrice prices modules at mods' prices, as the catalog does for built-ins.
func registryPrice(mods *modules.Registry) func(string) int64 {
	return func(name string) int64 {
		if m, ok := mods.Get(name); ok {
			return m.CostMilli()
		}
		return 0
	}
}
