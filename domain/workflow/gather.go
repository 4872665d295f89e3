package workflow

import (
	"fmt"

	"github.com/switchyard/switchyard/domain"
)

// validateBodies checks the explicit bodies of the FOR_EACH components (config.body): each id
// names a component downstream of its FOR_EACH, once; the body is closed (each body component's
// upstreams are its FOR_EACH, the body, or components that run before the loop), so that an
// iteration never waits on work that runs after the loop; every edge out of the FOR_EACH goes
// into the body; and an edge out of the body (a gather edge) carries no condition.
func (g Graph) validateBodies(d Definition) error {
	for _, id := range g.Order {
		if g.Components[id].Module != ModuleForEach {
			continue
		}
		cfg, err := ParseForEach(g.Components[id].Config)
		if err != nil || len(cfg.Body) == 0 {
			continue
		}
		if err := g.validateBody(d, id, cfg.Body); err != nil {
			return err
		}
	}
	return nil
}

func (g Graph) validateBody(d Definition, forEach string, ids []string) error {
	field := componentField(d, forEach) + ".config.body"
	downstream := g.Reachable(forEach)
	body := map[string]bool{}
	for i, id := range ids {
		at := fmt.Sprintf("%s[%d]", field, i)
		switch _, ok := g.Components[id]; {
		case !ok:
			return domain.Invalid(at, "names no component (%q)", id)
		case id == forEach:
			return domain.Invalid(at, "a %s cannot be part of its own body", ModuleForEach)
		case !downstream[id]:
			return domain.Invalid(at, "component %q is not downstream of %s %q", id, ModuleForEach, forEach)
		case body[id]:
			return domain.Invalid(at, "lists component %q twice", id)
		}
		body[id] = true
	}
	for _, e := range g.Out[forEach] {
		if !body[e.To] {
			return domain.Invalid(field, "does not list %q, which %s %q feeds: every edge out of a %s goes into its body",
				e.To, ModuleForEach, forEach, ModuleForEach)
		}
	}
	for _, id := range ids {
		for _, e := range g.In[id] {
			if e.From != forEach && !body[e.From] && downstream[e.From] {
				return domain.Invalid(field, "is not closed: body component %q takes input from %q, which runs after the loop; list %q in the body or take its input from elsewhere",
					id, e.From, e.From)
			}
		}
	}
	for i, e := range d.Edges {
		if body[e.From] && !body[e.To] && e.When != "" {
			return domain.Invalid(fmt.Sprintf("edges[%d].when", i), "an edge out of the body of %s %q gathers every iteration and cannot have a condition: put it on the next edge",
				ModuleForEach, forEach)
		}
	}
	return nil
}

// validateNesting allows one level of FOR_EACH nesting: a FOR_EACH inside another's body has
// its whole body inside the outer body, holds no FOR_EACH itself, and gathers only into the
// outer body (its outputs are per outer iteration).
func (g Graph) validateNesting(d Definition) error {
	for _, outer := range g.Order {
		if g.Components[outer].Module != ModuleForEach {
			continue
		}
		body := g.Body(outer)
		for _, inner := range g.Order {
			if !body[inner] || g.Components[inner].Module != ModuleForEach {
				continue
			}
			if err := g.validateInner(d, outer, inner, body); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g Graph) validateInner(d Definition, outer, inner string, outerBody map[string]bool) error {
	innerBody := g.Body(inner)
	for _, b := range g.Order {
		if !innerBody[b] {
			continue
		}
		if g.Components[b].Module == ModuleForEach {
			return domain.Invalid(componentField(d, b), "a %s nested two levels deep (in %q, itself in the body of %q) is not supported: one level of nesting is",
				ModuleForEach, inner, outer)
		}
		if !outerBody[b] {
			return domain.Invalid(componentField(d, inner)+".config.body", "component %q is in the body of nested %s %q but not in the body of its outer %s %q",
				b, ModuleForEach, inner, ModuleForEach, outer)
		}
	}
	for i, e := range d.Edges {
		if innerBody[e.From] && !innerBody[e.To] && !outerBody[e.To] {
			return domain.Invalid(fmt.Sprintf("edges[%d]", i), "leaves the body of nested %s %q and of its outer %s %q at once: gather into the outer body first",
				ModuleForEach, inner, ModuleForEach, outer)
		}
	}
	return nil
}

// InnermostBodies maps each component of a FOR_EACH body to its innermost FOR_EACH: a nested
// loop's body is inside its outer loop's body too.
func (g Graph) InnermostBodies() map[string]string {
	of := map[string]map[string]bool{}
	for id, c := range g.Components {
		if c.Module == ModuleForEach {
			of[id] = g.Body(id)
		}
	}
	body := map[string]string{}
	for f, members := range of {
		for b := range members {
			if cur, ok := body[b]; !ok || len(members) < len(of[cur]) {
				body[b] = f
			}
		}
	}
	return body
}
