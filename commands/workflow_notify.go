package commands

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workflow"
)

// Associated data of a definition's sealed notify values: an envelope of one field cannot
// be opened as another, nor as an execution's callback.
var (
	NotifySecretAAD  = []byte("notifySecret")
	NotifyHeadersAAD = []byte("notifyHeaders")
)

// notifyFields renames the callback checks' fields to the definition's.
var notifyFields = strings.NewReplacer("callbackUrl", "notify.url", "callbackSecret", "notify.secret",
	"callbackHeaders", "notify.headers")

// sealNotify checks a definition's notify as submit checks a callback (an absolute https URL
// without credentials, a secret and headers within bounds, no header the delivery sets) and
// seals its secret and header values. Sealed values in a request are refused: only this
// function writes them.
func (h *Workflows) sealNotify(d workflow.Definition) (workflow.Definition, error) {
	n := d.Notify
	if n == nil {
		return d, nil
	}
	switch {
	case n.SealedSecret != "" || n.SealedHeaders != "" || len(n.HeaderNames) > 0:
		return d, domain.Invalid("notify", "takes url, secret and headers only")
	case n.URL == "":
		return d, domain.Invalid("notify.url", "is required")
	}
	if err := checkCallback(CallbackRequest{URL: n.URL, Secret: n.Secret, Headers: n.Headers}); err != nil {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			return d, domain.Invalid(notifyFields.Replace(ve.Field), "%s", ve.Message)
		}
		return d, err
	}
	sealed := workflow.Notify{URL: n.URL}
	if n.Secret != "" || len(n.Headers) > 0 {
		if h.sealer == nil {
			return d, errors.New("workflow notify: no sealer configured for its secret")
		}
	}
	if n.Secret != "" {
		v, err := h.sealer.Seal([]byte(n.Secret), NotifySecretAAD)
		if err != nil {
			return d, err
		}
		sealed.SealedSecret = v
	}
	if len(n.Headers) > 0 {
		plain, err := json.Marshal(n.Headers)
		if err != nil {
			return d, err
		}
		if sealed.SealedHeaders, err = h.sealer.Seal(plain, NotifyHeadersAAD); err != nil {
			return d, err
		}
		for name := range n.Headers {
			sealed.HeaderNames = append(sealed.HeaderNames, name)
		}
		sort.Strings(sealed.HeaderNames)
	}
	d.Notify = &sealed
	return d, nil
}
