package commands

import (
	"sync"

	"github.com/switchyard/switchyard/modules"
)

// expressionCache holds compiled payload expressions (a WAIT's until, a concurrency key, an
// event's filter) by source, as conditionCache holds edges' conditions: each is compiled once
// per process, not once per use.
type expressionCache struct {
	mu sync.Mutex
	m  map[string]*modules.PayloadExpression
}

// payloadExpressions is the process's cache of payload expressions.
var payloadExpressions = expressionCache{m: map[string]*modules.PayloadExpression{}}

// get is the expression src, compiled once.
func (c *expressionCache) get(src string) (*modules.PayloadExpression, error) {
	return c.compiled("value:"+src, src, modules.CompilePayloadExpression)
}

// getFilter is the filter src (an expression that must yield a boolean), compiled once.
func (c *expressionCache) getFilter(src string) (*modules.PayloadExpression, error) {
	return c.compiled("filter:"+src, src, modules.CompilePayloadFilter)
}

func (c *expressionCache) compiled(key, src string, compile func(field, src string) (*modules.PayloadExpression, error)) (*modules.PayloadExpression, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.m[key]; ok {
		return p, nil
	}
	// Stored definitions were checked when saved, so the field named here is never shown.
	p, err := compile("expression", src)
	if err != nil {
		return nil, err
	}
	if len(c.m) >= maxCachedConditions {
		clear(c.m)
	}
	c.m[key] = p
	return p, nil
}
