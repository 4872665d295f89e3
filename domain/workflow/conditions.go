package workflow

import (
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/domain"
)

// MaxWhenLength bounds an edge's condition, as expr.eval bounds its expression.
const MaxWhenLength = 10000

// ConditionCheck compiles an edge's condition: nil, or an error saying why it does not compile.
type ConditionCheck func(when string) error

// ValidateConditions checks the edges' conditions of a definition Validate accepted; the
// error names the edge ("edges[2].when"). A FOR_EACH feeds every item to its body, so an edge
// out of one takes no condition: it goes on an edge inside the body, evaluated per iteration.
func (d Definition) ValidateConditions(check ConditionCheck) error {
	modules := map[string]string{}
	for _, c := range d.Components {
		modules[c.ID] = c.Module
	}
	for i, e := range d.Edges {
		if e.When == "" {
			continue
		}
		field := fmt.Sprintf("edges[%d].when", i)
		switch {
		case strings.TrimSpace(e.When) == "":
			return domain.Invalid(field, "must be an expression, or left out for an edge that is always taken")
		case len(e.When) > MaxWhenLength:
			return domain.Invalid(field, "must be at most %d characters", MaxWhenLength)
		case modules[e.From] == ModuleForEach:
			return domain.Invalid(field, "an edge out of a %s cannot have a condition: put it on an edge inside the loop body", ModuleForEach)
		}
		if err := domain.CheckStorableString(field, e.When); err != nil {
			return err
		}
		if err := check(e.When); err != nil {
			return domain.Invalid(field, "%s", err)
		}
	}
	return nil
}
