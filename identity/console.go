package identity

import "github.com/switchyard/switchyard/seal"

// Sealer is the provider's sealer, for pages beside sign-in that hold a secret in a cookie for
// a moment (the console's one view of a new API key's secret).
func (p *Provider) Sealer() *seal.Sealer { return p.opts.Sealer }

// SecureCookies reports whether cookies carry Secure (the issuer is https).
func (p *Provider) SecureCookies() bool { return p.secure }
