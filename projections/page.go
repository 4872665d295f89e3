package projections

import (
	"net/url"
	"strconv"

	"github.com/switchyard/switchyard/domain"
)

// Pagination bounds of every list (SPEC.md 4.9 leaves them open). MaxPage keeps the offset,
// (page-1) x limit, below MaxPage x MaxPageLimit (10^7): far from overflowing, and a bound on
// the rows one request makes PostgreSQL skip.
const (
	DefaultPageLimit = 20
	MaxPageLimit     = 100
	MaxPage          = 100_000
)

// NewPage is page (1 to MaxPage) of limit items (1 to MaxPageLimit), or the 400 naming the
// parameter out of range. Every list's page passes here: the query string, MCP's arguments
// and the CLI's flags.
func NewPage(page, limit int) (Page, error) {
	p := Page{Page: page, Limit: limit}
	if page < 1 || page > MaxPage {
		return p, domain.Invalid("page", "must be an integer from 1 to %d", MaxPage)
	}
	if limit < 1 || limit > MaxPageLimit {
		return p, domain.Invalid("limit", "must be an integer from 1 to %d", MaxPageLimit)
	}
	return p, nil
}

// PageFromQuery reads the page (default 1) and limit (default 20) of a query string, in the
// bounds of NewPage; a value that is not a number is refused the same way.
func PageFromQuery(q url.Values) (Page, error) {
	page, err := intParam(q, "page", 1)
	if err != nil {
		return Page{Page: 1, Limit: DefaultPageLimit}, domain.Invalid("page", "must be an integer from 1 to %d", MaxPage)
	}
	limit, err := intParam(q, "limit", DefaultPageLimit)
	if err != nil {
		return Page{Page: 1, Limit: DefaultPageLimit}, domain.Invalid("limit", "must be an integer from 1 to %d", MaxPageLimit)
	}
	return NewPage(page, limit)
}

// intParam is the query parameter name as an int, def when absent or empty.
func intParam(q url.Values, name string, def int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	return strconv.Atoi(v)
}
