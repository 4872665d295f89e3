package projections

import (
	"net/url"
	"strconv"

	"github.com/switchyard/switchyard/domain"
)

// Pagination defaults of every list (SPEC.md 4.9 leaves them open).
const (
	DefaultPageLimit = 20
	MaxPageLimit     = 100
)

// PageFromQuery reads the page (from 1) and limit (1 to 100, default 20) of a query string,
// with the 400 naming the parameter when one is not a number in range.
func PageFromQuery(q url.Values) (Page, error) {
	p := Page{Page: 1, Limit: DefaultPageLimit}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, domain.Invalid("page", "must be an integer of at least 1")
		}
		p.Page = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageLimit {
			return p, domain.Invalid("limit", "must be an integer from 1 to %d", MaxPageLimit)
		}
		p.Limit = n
	}
	return p, nil
}
