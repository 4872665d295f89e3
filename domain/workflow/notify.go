package workflow

// Notify is where a definition's runs are announced when they end (workflow.run.terminal,
// docs/webhooks.md). A request gives URL, Secret and Headers in the clear; commands checks them
// and seals Secret and the header values before the definition enters an event, so only
// URL, SealedSecret, SealedHeaders and HeaderNames are ever stored, and the view shows URL,
// Signed and HeaderNames.
type Notify struct {
	URL string `json:"url"`
	// Secret and Headers are the request's clear values: never stored.
	Secret  string            `json:"secret,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// SealedSecret and SealedHeaders are seal envelopes (associated data notifySecret and
	// notifyHeaders); HeaderNames lists the headers' names for the view.
	SealedSecret  string   `json:"sealedSecret,omitempty"`
	SealedHeaders string   `json:"sealedHeaders,omitempty"`
	HeaderNames   []string `json:"headerNames,omitempty"`
}

// Signed reports whether deliveries carry an HMAC signature.
func (n Notify) Signed() bool { return n.SealedSecret != "" }

// NotifyView is a definition's notify as GET shows it: never a secret or a header value.
type NotifyView struct {
	URL         string   `json:"url"`
	Signed      bool     `json:"signed"`
	HeaderNames []string `json:"headerNames,omitempty"`
}

// View renders n; nil for none.
func (n *Notify) View() *NotifyView {
	if n == nil {
		return nil
	}
	return &NotifyView{URL: n.URL, Signed: n.Signed(), HeaderNames: n.HeaderNames}
}

// WithoutSecrets is d as shown to a person editing it: its notify keeps the URL and the
// header names, never a sealed value (saving it again sends no secret: deliveries go unsigned
// until one is given).
func (d Definition) WithoutSecrets() Definition {
	if d.Notify != nil {
		d.Notify = &Notify{URL: d.Notify.URL}
	}
	return d
}
