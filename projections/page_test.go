package projections_test

import (
	"errors"
	"math"
	"net/url"
	"testing"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/projections"
)

// Every list's page passes NewPage: in bounds it is served, out of them it is a 400 naming the
// parameter, and the largest offset it allows is far from overflowing (issue 26 item 6).
func TestPageBounds(t *testing.T) {
	for query, field := range map[string]string{
		"page=9223372036854775807": "page", "page=100001": "page", "page=0": "page", "page=-1": "page", "page=1e3": "page",
		"limit=0": "limit", "limit=101": "limit", "limit=9223372036854775807": "limit", "page=2&limit=x": "limit",
	} {
		q, _ := url.ParseQuery(query)
		_, err := projections.PageFromQuery(q)
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s: %v, want a 400 naming %s", query, err, field)
		}
	}
	for query, want := range map[string]projections.Page{
		"":                      {Page: 1, Limit: projections.DefaultPageLimit},
		"page=100000&limit=100": {Page: projections.MaxPage, Limit: projections.MaxPageLimit},
		"page=3&limit=7":        {Page: 3, Limit: 7},
	} {
		q, _ := url.ParseQuery(query)
		if p, err := projections.PageFromQuery(q); err != nil || p != want {
			t.Errorf("%q: %+v %v, want %+v", query, p, err, want)
		}
	}
	last, err := projections.NewPage(projections.MaxPage, projections.MaxPageLimit)
	if err != nil || last.Offset() != (projections.MaxPage-1)*projections.MaxPageLimit || last.Offset() > math.MaxInt32 {
		t.Fatalf("the last page's offset %d (%v) must fit any integer column", last.Offset(), err)
	}
}
