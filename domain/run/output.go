package run

import (
	"encoding/json"
	"slices"
)

// Output is the run's output once it COMPLETED, null before: the outputs of its leaves (the
// components of its scope with no outgoing edge), keyed by component id. A skipped leaf is
// there with null, so the keys do not depend on which branch ran; a leaf inside a FOR_EACH
// body gives the array of its iterations' outputs, in item order.
func (s *State) Output() json.RawMessage {
	if s.Status != StatusCompleted {
		return json.RawMessage("null")
	}
	out := map[string]json.RawMessage{}
	for id := range s.scope {
		if len(s.graph.Out[id]) > 0 {
			continue
		}
		if s.body[id] != "" {
			out[id] = s.iterationOutputs(id)
			continue
		}
		st, ok := s.stageAt(id, NoIteration)
		if !ok {
			out[id] = json.RawMessage("null")
			continue
		}
		out[id] = nullable(st.Output)
	}
	b, _ := json.Marshal(out)
	return b
}

// iterationOutputs is the array of a body component's outputs, by iteration.
func (s *State) iterationOutputs(component string) json.RawMessage {
	var stages []Stage
	for _, st := range s.Stages {
		if st.ComponentID == component && st.Iteration != NoIteration {
			stages = append(stages, st)
		}
	}
	slices.SortFunc(stages, func(a, b Stage) int { return a.Iteration - b.Iteration })
	outs := make([]json.RawMessage, len(stages))
	for i, st := range stages {
		outs[i] = nullable(st.Output)
	}
	b, _ := json.Marshal(outs)
	return b
}
