package identity

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/signingkey"
	"github.com/switchyard/switchyard/projections"
	"github.com/switchyard/switchyard/seal"
)

// RSAKeyBits is the size of new signing keys.
const RSAKeyBits = 2048

// ErrNoSigningKey means the ring holds no key yet (EnsureKey was not called).
var ErrNoSigningKey = errors.New("no signing key")

// KeyRing holds the token signing keys: the newest signs, every key that may still have a live
// token verifies and is published in the JWKS. Keys live in signingkey-<kid> streams with the
// private half sealed; the ring reads them from the signing_keys read model, and folds a single
// key's stream when a token names a kid it does not know yet (a key another process just created).
type KeyRing struct {
	cmds    *commands.Commands
	queries *projections.Queries
	sealer  *seal.Sealer
	now     func() time.Time
	// publishFor is how long a key stays published after a newer key replaced it: the longest
	// lifetime of any token it may have signed.
	publishFor time.Duration

	mu      sync.RWMutex
	keys    map[string]*ringKey
	current *ringKey
}

type ringKey struct {
	kid     string
	n, e    string
	pub     *rsa.PublicKey
	priv    *rsa.PrivateKey
	created time.Time
	retired time.Time // zero while it is the newest key
}

func newKeyRing(cmds *commands.Commands, q *projections.Queries, sealer *seal.Sealer, now func() time.Time, publishFor time.Duration) *KeyRing {
	return &KeyRing{cmds: cmds, queries: q, sealer: sealer, now: now, publishFor: publishFor, keys: map[string]*ringKey{}}
}

// sealAAD binds a sealed private key to its stream, so it cannot be moved to another key's event.
func sealAAD(kid string) []byte { return []byte(commands.SigningKeyStream(kid)) }

// Reload reads every key from the read model and adds the ones the ring does not hold.
func (k *KeyRing) Reload(ctx context.Context) error {
	list, err := k.queries.SigningKeys(ctx)
	if err != nil {
		return fmt.Errorf("load signing keys: %w", err)
	}
	for _, c := range list {
		if err := k.add(c); err != nil {
			return err
		}
	}
	return nil
}

// add opens a recorded key and puts it in the ring, recomputing which key is current.
func (k *KeyRing) add(c signingkey.Created) error {
	k.mu.RLock()
	_, have := k.keys[c.KID]
	k.mu.RUnlock()
	if have {
		return nil
	}
	der, err := k.sealer.Open(c.PrivateKey, sealAAD(c.KID))
	if err != nil {
		return fmt.Errorf("open signing key %s: %w", c.KID, err)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return fmt.Errorf("parse signing key %s: %w", c.KID, err)
	}
	priv, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return fmt.Errorf("signing key %s is not RSA", c.KID)
	}
	rk := &ringKey{kid: c.KID, n: c.N, e: c.E, pub: &priv.PublicKey, priv: priv, created: c.At}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, have := k.keys[c.KID]; have {
		return nil
	}
	k.keys[c.KID] = rk
	// Keys ordered by creation: each key retires when the next one is created.
	var newest *ringKey
	for _, key := range k.keys {
		if newest == nil || key.created.After(newest.created) || (key.created.Equal(newest.created) && key.kid > newest.kid) {
			newest = key
		}
	}
	for _, key := range k.keys {
		key.retired = time.Time{}
		if key == newest {
			continue
		}
		for _, other := range k.keys {
			if other.created.After(key.created) || (other.created.Equal(key.created) && other.kid > key.kid) {
				if key.retired.IsZero() || other.created.Before(key.retired) {
					key.retired = other.created
				}
			}
		}
	}
	k.current = newest
	return nil
}

// Rotate generates a new key, records it and makes it the signing key of this ring at once;
// other processes pick it up on their next reload or when they first see its kid.
func (k *KeyRing) Rotate(ctx context.Context) (string, error) {
	c, err := NewSigningKey(k.sealer)
	if err != nil {
		return "", err
	}
	if _, err := k.cmds.Identity.CreateSigningKey(ctx, c); err != nil {
		return "", err
	}
	stored, err := k.cmds.Identity.SigningKey(ctx, c.KID)
	if err != nil {
		return "", err
	}
	return c.KID, k.add(stored)
}

// NewSigningKey generates an RSA key and seals its private half for the event.
func NewSigningKey(sealer *seal.Sealer) (signingkey.Created, error) {
	priv, err := rsa.GenerateKey(rand.Reader, RSAKeyBits)
	if err != nil {
		return signingkey.Created{}, fmt.Errorf("generate signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return signingkey.Created{}, fmt.Errorf("encode signing key: %w", err)
	}
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return signingkey.Created{}, fmt.Errorf("key id: %w", err)
	}
	kid := base64.RawURLEncoding.EncodeToString(b)
	sealed, err := sealer.Seal(der, sealAAD(kid))
	if err != nil {
		return signingkey.Created{}, fmt.Errorf("seal signing key: %w", err)
	}
	return signingkey.Created{KID: kid, Alg: signingkey.AlgRS256,
		N: base64.RawURLEncoding.EncodeToString(priv.N.Bytes()),
		E: base64.RawURLEncoding.EncodeToString(big.NewInt(int64(priv.E)).Bytes()), PrivateKey: sealed}, nil
}

// EnsureKey loads the ring and creates the first key when there is none.
func (k *KeyRing) EnsureKey(ctx context.Context) error {
	if err := k.Reload(ctx); err != nil {
		return err
	}
	k.mu.RLock()
	have := k.current != nil
	k.mu.RUnlock()
	if have {
		return nil
	}
	// The read model may be behind the log (a fresh rebuild, a first start racing another
	// process): ask the log before creating a key nobody needs.
	if err := k.ReloadFromLog(ctx); err != nil {
		return err
	}
	if k.CurrentKID() != "" {
		return nil
	}
	_, err := k.Rotate(ctx)
	return err
}

// ReloadFromLog reads every key from the event log rather than the read model: for commands
// that run without the projections (the CLI) and for a first start.
func (k *KeyRing) ReloadFromLog(ctx context.Context) error {
	keys, err := k.cmds.Identity.SigningKeys(ctx)
	if err != nil {
		return err
	}
	for _, c := range keys {
		if err := k.add(c); err != nil {
			return err
		}
	}
	return nil
}

// Sign signs claims with the current key, naming it in the kid header.
func (k *KeyRing) Sign(claims jwt.Claims) (string, error) {
	k.mu.RLock()
	cur := k.current
	k.mu.RUnlock()
	if cur == nil {
		return "", ErrNoSigningKey
	}
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	t.Header["kid"] = cur.kid
	s, err := t.SignedString(cur.priv)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return s, nil
}

// CurrentKID is the kid new tokens are signed with.
func (k *KeyRing) CurrentKID() string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.current == nil {
		return ""
	}
	return k.current.kid
}

// published reports whether key may still verify a live token at now.
func (k *KeyRing) published(key *ringKey, now time.Time) bool {
	return key.retired.IsZero() || now.Before(key.retired.Add(k.publishFor))
}

// Keyfunc finds the public key named by a token's kid for golang-jwt.
func (k *KeyRing) Keyfunc(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, errors.New("token has no kid")
		}
		k.mu.RLock()
		key := k.keys[kid]
		k.mu.RUnlock()
		if key == nil {
			// Created by another process moments ago? Its stream says so without waiting for
			// the read model. An unknown kid costs one stream read.
			c, err := k.cmds.Identity.SigningKey(ctx, kid)
			if err != nil {
				if errors.Is(err, domain.ErrNotFound) {
					return nil, fmt.Errorf("unknown kid %q", kid)
				}
				return nil, err
			}
			if err := k.add(c); err != nil {
				return nil, err
			}
			k.mu.RLock()
			key = k.keys[kid]
			k.mu.RUnlock()
		}
		if !k.published(key, k.now()) {
			return nil, fmt.Errorf("kid %q is retired", kid)
		}
		return key.pub, nil
	}
}

// JWK is one public key of the JWKS (RFC 7517).
type JWK struct {
	Kty string `json:"kty"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	N   string `json:"n"`
	E   string `json:"e"`
}

// JWKS lists every key that may still verify a live token, newest first.
func (k *KeyRing) JWKS() []JWK {
	now := k.now()
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]JWK, 0, len(k.keys))
	for _, key := range k.keys {
		if k.published(key, now) {
			out = append(out, JWK{Kty: "RSA", Use: "sig", Alg: signingkey.AlgRS256, Kid: key.kid, N: key.n, E: key.e})
		}
	}
	// Newest first, so a reader taking the first key takes the signing one.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && k.keys[out[j].Kid].created.After(k.keys[out[j-1].Kid].created); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
