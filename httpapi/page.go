package httpapi

import (
	"context"
	"net/http"

	"github.com/switchyard/switchyard/projections"
)

// Pagination defaults of every list endpoint (SPEC.md 4.9 leaves them open).
const (
	DefaultPageLimit = projections.DefaultPageLimit
	MaxPageLimit     = projections.MaxPageLimit
)

// ParsePage reads the page (1 to projections.MaxPage) and limit (1 to 100, default 20) query
// parameters: projections.PageFromQuery, the one parser of every list's page.
func ParsePage(r *http.Request) (projections.Page, error) {
	return projections.PageFromQuery(r.URL.Query())
}

// PageBody is the shape of every list response.
type PageBody[T any] struct {
	Data       []T `json:"data"`
	Total      int `json:"total"`
	Page       int `json:"page"`
	TotalPages int `json:"totalPages"`
}

// WritePage writes one page of a list of total items.
func WritePage[T any](w http.ResponseWriter, items []T, total int, p projections.Page) {
	if items == nil {
		items = []T{}
	}
	WriteJSON(w, http.StatusOK, PageBody[T]{Data: items, Total: total, Page: p.Page, TotalPages: p.TotalPages(total)})
}

// PageOf cuts page p out of an in-memory list.
func PageOf[T any](all []T, p projections.Page) []T {
	start := min(p.Offset(), len(all))
	return all[start:min(start+p.Limit, len(all))]
}

// ServePage answers a list request: the page and limit of the query string, the page query
// returns, and the SPEC.md 4.9 envelope (or the error's status).
func ServePage[T any](w http.ResponseWriter, r *http.Request, query func(ctx context.Context, p projections.Page) ([]T, int, error)) {
	p, err := ParsePage(r)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	list, total, err := query(r.Context(), p)
	if err != nil {
		WriteDomainError(w, r, err)
		return
	}
	WritePage(w, list, total, p)
}
