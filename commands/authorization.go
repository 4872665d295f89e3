package commands

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/authorization"
	"github.com/switchyard/switchyard/eventstore"
)

var authorizationAgg = aggregate[authorization.State]{evolve: authorization.State.Evolve}

// AuthorizationStream is the stream of an authorization.
func AuthorizationStream(id string) string { return eventstore.StreamName(authorization.Category, id) }

// Codes and refresh tokens are "<authorization id>.<256 random bits>": the id routes the token to
// its stream without a lookup table (and without waiting for a read model), the random part is
// the secret, recorded only as a hash.
func newAuthorizationToken(authorizationID string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return authorizationID + "." + base64.RawURLEncoding.EncodeToString(b), nil
}

// AuthorizationOfToken returns the authorization id a code or refresh token names.
func AuthorizationOfToken(token string) (string, bool) {
	id, rest, ok := strings.Cut(token, ".")
	if !ok || rest == "" {
		return "", false
	}
	u, err := uuid.Parse(id)
	if err != nil || u.String() != id {
		return "", false
	}
	return id, true
}

// GrantAuthorization is the input of the consent command.
type GrantAuthorization struct {
	UserID, ClientID, WorkspaceID string
	Scopes                        []string
	CodeChallenge, RedirectURI    string
	Nonce                         string
	AuthTime                      time.Time
	CodeTTL                       time.Duration
}

// GrantAuthorization records a consent bound to one workspace and returns its id and the
// authorization code (the code exists only in this return value). Only a member of the
// workspace consents, and only to what their role holds there: requested scopes beyond the
// role are dropped (access.WithinRole; the consent page said which).
func (h *Apps) GrantAuthorization(ctx context.Context, c GrantAuthorization) (id, code string, err error) {
	ws, err := h.workspaces.Workspace(ctx, c.WorkspaceID)
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		return "", "", wrap("grant authorization", err)
	}
	role := ws.Members[c.UserID]
	if role == "" {
		return "", "", fmt.Errorf("grant authorization: %w", access.ErrNotMember)
	}
	c.Scopes, _ = access.WithinRole(role, c.Scopes)
	id = uuid.NewString()
	code, err = newAuthorizationToken(id)
	if err != nil {
		return "", "", err
	}
	_, err = execute(ctx, h, AuthorizationStream(id), authorizationAgg, func(s authorization.State) ([]domain.Event, error) {
		return authorization.DecideGrant(s, authorization.Grant{ID: id, UserID: c.UserID, ClientID: c.ClientID,
			WorkspaceID: c.WorkspaceID, Scopes: c.Scopes, CodeHash: authorization.HashToken(code),
			CodeChallenge: c.CodeChallenge, RedirectURI: c.RedirectURI, Nonce: c.Nonce, AuthTime: c.AuthTime, CodeTTL: c.CodeTTL}, h.now())
	})
	if err != nil {
		return "", "", wrap("grant authorization", err)
	}
	return id, code, nil
}

// RedeemCode is the input of the code exchange.
type RedeemCode struct {
	Code, ClientID, RedirectURI, Verifier string
	RefreshTTL                            time.Duration
}

// RedeemCode exchanges an authorization code for the first refresh token of the chain. Any
// failure is authorization.ErrInvalidGrant. A code used before revokes the authorization, and
// with it every token issued from the code (RFC 6749 4.1.2). The append expects the revision
// read, so of two concurrent exchanges of one code exactly one succeeds.
func (h *Apps) RedeemCode(ctx context.Context, c RedeemCode) (authorization.State, string, error) {
	id, ok := AuthorizationOfToken(c.Code)
	if !ok {
		return authorization.State{}, "", authorization.ErrInvalidGrant
	}
	refresh, err := newAuthorizationToken(id)
	if err != nil {
		return authorization.State{}, "", err
	}
	return h.advanceChain(ctx, id, func(s authorization.State) ([]domain.Event, error) {
		return authorization.DecideRedeem(s, authorization.Redeem{CodeHash: authorization.HashToken(c.Code), ClientID: c.ClientID,
			RedirectURI: c.RedirectURI, Verifier: c.Verifier, RefreshHash: authorization.HashToken(refresh), RefreshTTL: c.RefreshTTL}, h.now())
	}, refresh, authorization.ReasonCodeReuse)
}

// RefreshAuthorization rotates a refresh token: the presented one stops working and a new one
// is returned. A token that was already rotated away revokes the authorization's chain. Two
// concurrent refreshes of one token never both succeed: both append at the revision they read,
// the loser gets a conflict and answers invalid_grant (without revoking: that was a race of the
// legitimate client, not a replay; a later replay of the token does revoke).
func (h *Apps) RefreshAuthorization(ctx context.Context, clientID, token string, ttl time.Duration) (authorization.State, string, error) {
	id, ok := AuthorizationOfToken(token)
	if !ok {
		return authorization.State{}, "", authorization.ErrInvalidGrant
	}
	next, err := newAuthorizationToken(id)
	if err != nil {
		return authorization.State{}, "", err
	}
	presented := authorization.HashToken(token)
	return h.advanceChain(ctx, id, func(s authorization.State) ([]domain.Event, error) {
		return authorization.DecideRefresh(s, clientID, presented, authorization.HashToken(next), ttl, h.now())
	}, next, authorization.ReasonRefreshUse)
}

func (h *Apps) advanceChain(ctx context.Context, id string, decide func(authorization.State) ([]domain.Event, error), token, replayReason string) (authorization.State, string, error) {
	stream := AuthorizationStream(id)
	cur, err := load(ctx, h, stream, authorizationAgg)
	if err != nil {
		return authorization.State{}, "", err
	}
	events, err := decide(cur.state)
	if errors.Is(err, authorization.ErrReplay) {
		if rerr := h.RevokeAuthorization(ctx, id, replayReason); rerr != nil {
			return authorization.State{}, "", rerr
		}
		return authorization.State{}, "", fmt.Errorf("%w: %w", authorization.ErrInvalidGrant, err)
	}
	if err != nil {
		return authorization.State{}, "", err
	}
	res, err := appendEvents(ctx, h, stream, cur.expected(), events)
	if isConflict(err) {
		h.cache.drop(stream)
		return authorization.State{}, "", fmt.Errorf("%w: concurrent use", authorization.ErrInvalidGrant)
	}
	if err != nil {
		return authorization.State{}, "", err
	}
	next := cur
	for _, e := range events {
		next.state = authorizationAgg.evolve(next.state, e)
	}
	next.revision, next.exists = res.Revision, true
	h.cache.put(stream, next)
	return next.state, token, nil
}

// RevokeAuthorization revokes an authorization; revoking it again succeeds without a new event.
func (h *Apps) RevokeAuthorization(ctx context.Context, id, reason string) error {
	id, err := canonicalID("authorization", id)
	if err != nil {
		return err
	}
	_, err = execute(ctx, h, AuthorizationStream(id), authorizationAgg, func(s authorization.State) ([]domain.Event, error) {
		return authorization.DecideRevoke(s, reason, h.now())
	})
	return wrap("revoke authorization "+id, err)
}

// Authorization folds the authorization with id from the event store, so a revocation is seen
// by the next request, not when a read model catches up.
func (h *Apps) Authorization(ctx context.Context, id string) (authorization.State, error) {
	id, err := canonicalID("authorization", id)
	if err != nil {
		return authorization.State{}, err
	}
	a, err := load(ctx, h, AuthorizationStream(id), authorizationAgg)
	if err != nil {
		return authorization.State{}, err
	}
	if !a.state.Exists {
		return authorization.State{}, fmt.Errorf("authorization %s: %w", id, domain.ErrNotFound)
	}
	return a.state, nil
}
