package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/reactors/livehub"
	"github.com/switchyard/switchyard/web/bearer"
)

// RunPageStream serves the run stream of the console's run page (console/runs.go): the page
// lives in the console, its stream here with the rest of the run stream machinery. It is
// signed in with the session cookie and streams a run only to members of its workspace.
type RunPageStream struct {
	Cmds *commands.Commands
	Hub  *livehub.Hub
	// Auth names and verifies the session cookie; identity.Provider is one.
	Auth SessionVerifier
	// Heartbeat is the interval of :ping comments on the page's stream (15s when 0).
	Heartbeat time.Duration
}

// SessionVerifier verifies bearer tokens and names the session cookie that carries one
// (__Host-sy_session on https); identity.Provider is one.
type SessionVerifier interface {
	bearer.Verifier
	SessionCookieName() string
}

// Mount adds the stream to the root router.
func (d *RunPageStream) Mount(root *mux.Router) {
	root.HandleFunc("/dashboard/runs/{runId}/stream", d.stream).Methods(http.MethodGet)
}

// signedIn returns the user id of the request's session cookie, "" when there is no live
// session. Only a session JWT counts: an app's access token in the cookie is refused.
func (d *RunPageStream) signedIn(r *http.Request) (string, error) {
	c, err := r.Cookie(d.Auth.SessionCookieName())
	if err != nil || c.Value == "" {
		return "", nil
	}
	p, err := d.Auth.VerifyBearer(r.Context(), c.Value)
	if errors.Is(err, bearer.ErrInvalidToken) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !p.Session {
		return "", nil
	}
	return p.UserID, nil
}

// errRunHidden is a run that is unknown or of a workspace the user is not a member of: both
// answer 404, so run ids of other workspaces cannot be probed.
var errRunHidden = errors.New("run not found")

// member checks that userID may read the run's workspace (domain/access); a run of another
// workspace is hidden.
func (d *RunPageStream) member(ctx context.Context, userID, workspaceID string) error {
	_, err := d.Cmds.Workspaces.Access(ctx, workspaceID, access.Caller{UserID: userID, Session: true}, access.ScopeWorkspaceRead)
	if errors.Is(err, access.ErrNotMember) {
		return errRunHidden
	}
	return err
}

// apiFailure answers a JSON route's failure: 401 without a session, 404 for a hidden run.
func apiFailure(w http.ResponseWriter, r *http.Request, userID string, err error) bool {
	switch {
	case err == nil && userID == "":
		WriteError(w, http.StatusUnauthorized, "sign in to the console first")
	case errors.Is(err, errRunHidden):
		WriteError(w, http.StatusNotFound, "run "+mux.Vars(r)["runId"]+" not found")
	case err != nil:
		WriteDomainError(w, r, err)
	default:
		return false
	}
	return true
}

func (d *RunPageStream) stream(w http.ResponseWriter, r *http.Request) {
	userID, err := d.signedIn(r)
	if apiFailure(w, r, userID, err) {
		return
	}
	id := mux.Vars(r)["runId"]
	if _, err := uuid.Parse(id); err != nil {
		apiFailure(w, r, userID, errRunHidden)
		return
	}
	name := commands.RunStream(id)
	watch := d.Hub.WatchRecords(name) // before the state is read: nothing falls in between
	feed := &runFeed{cmds: d.Cmds, stream: name}
	first, err := feed.advance(r.Context())
	feed.watch = watch
	if err == nil && !feed.state.Exists {
		err = errRunHidden
	}
	if err == nil {
		err = d.member(r.Context(), userID, feed.state.WorkspaceID)
	}
	if err != nil {
		watch.Close()
		if !errors.Is(err, errRunHidden) {
			err = fmt.Errorf("dashboard run stream: %w", err)
		}
		apiFailure(w, r, userID, err)
		return
	}
	serveSSE(w, r, sseStream{watch: watch, src: feed, first: first, heartbeat: d.Heartbeat, name: name})
}
