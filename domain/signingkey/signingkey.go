// Package signingkey is the token signing key aggregate: an RSA key pair whose private half is
// sealed (package seal) before it enters the event, and whose public half is published in the
// JWKS until every token it signed has expired.
package signingkey

import (
	"time"

	"github.com/switchyard/switchyard/domain"
)

// Category is the stream category of signing keys: signingkey-<kid>.
const Category = "signingkey"

// AlgRS256 is the only algorithm tokens are signed with (SPEC.md 5 rule 5).
const AlgRS256 = "RS256"

// Created records a new key. It becomes the signing key as the newest one; older keys keep
// verifying. PrivateKey is the seal of the PKCS#8 DER private key; N and E are the public
// modulus and exponent, base64url without padding as in a JWK.
type Created struct {
	KID        string    `json:"kid"`
	Alg        string    `json:"alg"`
	N          string    `json:"n"`
	E          string    `json:"e"`
	PrivateKey string    `json:"privateKey"`
	At         time.Time `json:"at"`
}

// EventType names the event in the log.
func (Created) EventType() string { return "SigningKeyCreated" }

func init() { domain.Events.Register(Created{}) }

// State is a key folded from its stream.
type State struct {
	Exists bool
	Key    Created
}

// Evolve applies one event.
func (s State) Evolve(e domain.Event) State {
	if c, ok := e.(Created); ok {
		return State{Exists: true, Key: c}
	}
	return s
}

// DecideCreate records the key once.
func DecideCreate(s State, c Created, now time.Time) ([]domain.Event, error) {
	if s.Exists {
		return nil, domain.ErrAlreadyExists
	}
	if c.KID == "" || c.N == "" || c.E == "" || c.PrivateKey == "" {
		return nil, domain.Invalid("key", "kid, public key and sealed private key are required")
	}
	c.Alg, c.At = AlgRS256, now.UTC()
	return []domain.Event{c}, nil
}
