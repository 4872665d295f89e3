package console

import (
	"fmt"
	"math"

	"github.com/switchyard/switchyard/domain/workflow"
)

// The workflow page's graph, drawn on the server as SVG from the definition: it needs no
// script, and it is the same drawing the run page's script makes (node size, layout).

const (
	nodeW, nodeH, graphPad = 190.0, 66.0, 24.0
)

// graph is an SVG drawing of a definition.
type graph struct {
	ViewBox       string
	Width, Height float64
	Nodes         []graphNode
	Edges         []graphEdge
}

type graphNode struct {
	X, Y         float64
	Name, Module string
}

type graphEdge struct{ X1, Y1, X2, Y2 float64 }

// drawGraph places each component at its canvas position or, when positions overlap (a
// definition written without positions has every component at [0, 0]), in columns by depth
// along the edges, as the run page does.
func drawGraph(def workflow.Definition) graph {
	pos := layout(def)
	var g graph
	minX, minY, maxX, maxY := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for _, c := range def.Components {
		p := pos[c.ID]
		minX, minY = math.Min(minX, p[0]), math.Min(minY, p[1])
		maxX, maxY = math.Max(maxX, p[0]+nodeW), math.Max(maxY, p[1]+nodeH)
		g.Nodes = append(g.Nodes, graphNode{X: p[0], Y: p[1], Name: c.Name, Module: c.Module})
	}
	if len(def.Components) == 0 {
		minX, minY, maxX, maxY = 0, 0, nodeW, nodeH
	}
	for _, e := range def.Edges {
		a, okA := pos[e.From]
		b, okB := pos[e.To]
		if !okA || !okB {
			continue
		}
		ax, ay, bx, by := a[0]+nodeW/2, a[1]+nodeH/2, b[0]+nodeW/2, b[1]+nodeH/2
		x1, y1 := border(ax, ay, bx-ax, by-ay, 0)
		x2, y2 := border(bx, by, ax-bx, ay-by, 4)
		g.Edges = append(g.Edges, graphEdge{X1: x1, Y1: y1, X2: x2, Y2: y2})
	}
	g.Width, g.Height = maxX-minX+2*graphPad, maxY-minY+2*graphPad
	g.ViewBox = fmt.Sprintf("%g %g %g %g", minX-graphPad, minY-graphPad, g.Width, g.Height)
	return g
}

func layout(def workflow.Definition) map[string][2]float64 {
	pos := make(map[string][2]float64, len(def.Components))
	overlap := false
	for i, c := range def.Components {
		pos[c.ID] = [2]float64(c.Position)
		for _, o := range def.Components[:i] {
			if math.Abs(o.Position[0]-c.Position[0]) < nodeW && math.Abs(o.Position[1]-c.Position[1]) < nodeH {
				overlap = true
			}
		}
	}
	if !overlap {
		return pos
	}
	depth := make(map[string]int, len(def.Components))
	for range def.Components { // longest path from a source; the bound guards bad data
		changed := false
		for _, e := range def.Edges {
			if depth[e.To] < depth[e.From]+1 {
				depth[e.To], changed = depth[e.From]+1, true
			}
		}
		if !changed {
			break
		}
	}
	rows := map[int]int{}
	for _, c := range def.Components {
		d := depth[c.ID]
		pos[c.ID] = [2]float64{float64(d) * (nodeW + 70), float64(rows[d]) * (nodeH + 40)}
		rows[d]++
	}
	return pos
}

// border is where the line from a node's centre towards (dx, dy) leaves its box, gap outside.
func border(cx, cy, dx, dy, gap float64) (float64, float64) {
	hw, hh := nodeW/2+gap, nodeH/2+gap
	t := math.Inf(1)
	if dx != 0 {
		t = hw / math.Abs(dx)
	}
	if dy != 0 {
		t = math.Min(t, hh/math.Abs(dy))
	}
	if math.IsInf(t, 1) {
		return cx, cy
	}
	return cx + dx*t, cy + dy*t
}
