package workflow

import (
	"fmt"

	"github.com/switchyard/switchyard/domain"
)

// Graph is a definition's components and edges indexed for the scheduler.
type Graph struct {
	Components map[string]Component
	// Order lists component ids in definition order.
	Order []string
	// In and Out list a component's incoming and outgoing edges in definition order.
	In, Out map[string][]Edge
}

// Graph indexes a valid definition.
func (d Definition) Graph() Graph {
	index := map[string]int{}
	for i, c := range d.Components {
		index[c.ID] = i
	}
	g, _ := d.graph(index)
	return g
}

func (d Definition) graph(index map[string]int) (Graph, error) {
	g := Graph{Components: map[string]Component{}, In: map[string][]Edge{}, Out: map[string][]Edge{}}
	for _, c := range d.Components {
		g.Components[c.ID] = c
		g.Order = append(g.Order, c.ID)
	}
	seen := map[[2]string]bool{}
	for i, e := range d.Edges {
		field := fmt.Sprintf("edges[%d]", i)
		if _, ok := index[e.From]; !ok {
			return g, domain.Invalid(field+".from", "names no component (%q): the edge dangles", e.From)
		}
		if _, ok := index[e.To]; !ok {
			return g, domain.Invalid(field+".to", "names no component (%q): the edge dangles", e.To)
		}
		if e.From == e.To {
			return g, domain.Invalid(field, "component %q cannot feed itself", e.From)
		}
		if seen[[2]string{e.From, e.To}] {
			return g, domain.Invalid(field, "duplicates the edge from %q to %q", e.From, e.To)
		}
		seen[[2]string{e.From, e.To}] = true
		for key := range e.Mapping {
			if key == "" {
				return g, domain.Invalid(field+".mapping", "keys must not be empty")
			}
		}
		g.Out[e.From] = append(g.Out[e.From], e)
		g.In[e.To] = append(g.In[e.To], e)
	}
	return g, nil
}

func (g Graph) validate(d Definition) error {
	triggers := 0
	for _, id := range g.Order {
		c := g.Components[id]
		switch {
		case IsTrigger(c.Module):
			triggers++
			if len(g.In[id]) > 0 {
				return domain.Invalid(componentField(d, id), "an %s trigger cannot have incoming edges", c.Module)
			}
		case c.Module == ModuleForEach:
			if len(g.In[id]) != 1 {
				return domain.Invalid(componentField(d, id), "a %s needs exactly one incoming edge: the component whose output holds the array", ModuleForEach)
			}
		}
	}
	if triggers == 0 {
		return domain.Invalid("components", "must hold at least one trigger component (%s)", triggerList())
	}
	if cyc := g.cycle(); cyc != "" {
		return domain.Invalid(componentField(d, cyc), "is part of a cycle; workflows must be acyclic")
	}
	reached := map[string]bool{}
	for _, id := range g.Order {
		if IsTrigger(g.Components[id].Module) {
			for r := range g.Reachable(id) {
				reached[r] = true
			}
		}
	}
	if err := g.validateBodies(d); err != nil {
		return err
	}
	for _, id := range g.Order {
		if !reached[id] {
			return domain.Invalid(componentField(d, id), "is not reachable from any trigger component")
		}
	}
	return g.validateNesting(d)
}

func componentField(d Definition, id string) string {
	for i, c := range d.Components {
		if c.ID == id {
			return fmt.Sprintf("components[%d] (component %q)", i, id)
		}
	}
	return fmt.Sprintf("component %q", id)
}

// cycle returns a component on a cycle, or "".
func (g Graph) cycle() string {
	const (
		visiting = 1
		done     = 2
	)
	mark := map[string]int{}
	var visit func(id string) string
	visit = func(id string) string {
		mark[id] = visiting
		for _, e := range g.Out[id] {
			switch mark[e.To] {
			case visiting:
				return e.To
			case 0:
				if c := visit(e.To); c != "" {
					return c
				}
			}
		}
		mark[id] = done
		return ""
	}
	for _, id := range g.Order {
		if mark[id] == 0 {
			if c := visit(id); c != "" {
				return c
			}
		}
	}
	return ""
}

// Reachable is from and every component downstream of it.
func (g Graph) Reachable(from string) map[string]bool {
	out := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if out[id] {
			continue
		}
		out[id] = true
		for _, e := range g.Out[id] {
			stack = append(stack, e.To)
		}
	}
	return out
}

// Body is the components a FOR_EACH runs once per item: those its config.body lists, or
// everything downstream of it.
func (g Graph) Body(forEach string) map[string]bool {
	if cfg, err := ParseForEach(g.Components[forEach].Config); err == nil && len(cfg.Body) > 0 {
		body := make(map[string]bool, len(cfg.Body))
		for _, id := range cfg.Body {
			body[id] = true
		}
		return body
	}
	body := g.Reachable(forEach)
	delete(body, forEach)
	return body
}
