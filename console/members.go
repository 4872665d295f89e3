package console

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/commands"
	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/workspace"
	"github.com/switchyard/switchyard/projections"
)

type membersData struct {
	List []memberRow
	// Roles are the roles the viewer may give.
	Roles []string
	Email string
	// Removing is the member whose removal waits for a confirmation.
	Removing *memberRow
}

// memberRow is a member as the page shows them, with what the viewer may do to them.
type memberRow struct {
	projections.MemberRow
	// Roles the viewer may move this member to; empty when the viewer may not change them.
	Roles []string
	// MayRemove: the viewer may take this member out.
	MayRemove bool
	// LastOwner: the only owner, whom no one demotes or removes.
	LastOwner bool
}

// members lists the workspace's members. Owners and admins add people by email, change a
// member's role and remove members, each its own form; only owners change an owner, and the
// last owner stays (workspace.DecideChangeRole).
func (c *Console) members(q *request) {
	var d membersData
	notice, errText, status := "", "", http.StatusOK
	if q.r.Method == http.MethodPost {
		if !c.requireManage(q) {
			return
		}
		notice, errText, status, d.Email = c.changeMembers(q)
	}
	ws, err := c.cmds.Workspaces.Workspace(q.ctx(), q.ws.ID)
	if err != nil {
		c.fail(q, err)
		return
	}
	if d.List, err = c.memberRows(q, ws); err != nil {
		c.fail(q, err)
		return
	}
	d.Roles = grantable(q.ws.Role)
	if id := q.r.URL.Query().Get("remove"); id != "" && q.r.Method == http.MethodGet {
		if i := slices.IndexFunc(d.List, func(m memberRow) bool { return m.UserID == id }); i >= 0 && d.List[i].MayRemove {
			d.Removing = &d.List[i]
		}
	}
	c.renderView(q, status, "members", "Members", d, notice, errText)
}

// changeMembers runs the form's action and says how it went.
func (c *Console) changeMembers(q *request) (notice, errText string, status int, email string) {
	f := q.r.PostForm
	var err error
	switch f.Get("action") {
	case "", "add":
		email = strings.TrimSpace(f.Get("email"))
		role := f.Get("role")
		if err = c.addMember(q, email, role); err == nil {
			return email + " is now " + article(role) + " " + role + " of " + q.ws.Name + ".", "", http.StatusOK, ""
		}
		if errors.Is(err, domain.ErrNotFound) {
			return "", "No account has the email " + email + ": they need to sign up first.", http.StatusBadRequest, email
		}
	case "set-role":
		ch := c.memberChange(q)
		ch.Role = f.Get("role")
		if err = c.cmds.Workspaces.ChangeMemberRole(q.acting(), ch); err == nil {
			return c.memberName(q, ch.UserID) + " is now " + article(ch.Role) + " " + ch.Role + ".", "", http.StatusOK, ""
		}
	case "remove":
		ch := c.memberChange(q)
		name := c.memberName(q, ch.UserID)
		if err = c.cmds.Workspaces.RemoveMember(q.acting(), ch); err == nil {
			return name + " is no longer a member of " + q.ws.Name + ".", "", http.StatusOK, ""
		}
	default:
		err = domain.Invalid("action", "must be add, set-role or remove")
	}
	status, _, errText = words(err, q.ws.Role)
	return "", errText, status, email
}

func (c *Console) memberChange(q *request) commands.MemberChange {
	return commands.MemberChange{WorkspaceID: q.ws.ID, UserID: q.r.PostForm.Get("user_id"), By: q.user.ID}
}

// memberName is how the notices name a member: their email, else their id.
func (c *Console) memberName(q *request, userID string) string {
	if u, err := c.cmds.Identity.User(q.ctx(), userID); err == nil && u.Email != "" {
		return u.Email
	}
	return userID
}

func (c *Console) addMember(q *request, email, role string) error {
	if email == "" {
		return domain.Invalid("email", "is required")
	}
	if !workspace.ValidRole(role) {
		return domain.Invalid("role", "must be owner, admin or member")
	}
	if !workspace.MayGrant(q.ws.Role, role) {
		return domain.Forbidden("a %s cannot make someone %s %s", q.ws.Role, article(role), role)
	}
	return c.cmds.Workspaces.AddMember(q.acting(), q.ws.ID, email, role)
}

// memberRows lists the members with their roles as the workspace's stream has them, so a
// change shows at once; the read model adds email, name and since (an account not there yet
// is folded).
func (c *Console) memberRows(q *request, ws workspace.State) ([]memberRow, error) {
	listed, err := c.q.MembersOf(q.ctx(), q.ws.ID)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]projections.MemberRow, len(listed))
	for _, m := range listed {
		byID[m.UserID] = m
	}
	out := make([]memberRow, 0, len(ws.Members))
	for id, role := range ws.Members {
		m, ok := byID[id]
		if !ok {
			u, err := c.cmds.Identity.User(q.ctx(), id)
			if err != nil {
				return nil, err
			}
			m = projections.MemberRow{UserID: id, Email: u.Email, Name: u.Name}
		}
		m.Role = role
		out = append(out, c.memberActions(q, ws, m))
	}
	rank := map[string]int{workspace.RoleOwner: 0, workspace.RoleAdmin: 1, workspace.RoleMember: 2}
	slices.SortFunc(out, func(a, b memberRow) int {
		if d := rank[a.Role] - rank[b.Role]; d != 0 {
			return d
		}
		return strings.Compare(a.Email, b.Email)
	})
	return out, nil
}

// memberActions says what the viewer may do to m, as workspace.DecideChangeRole decides it.
func (c *Console) memberActions(q *request, ws workspace.State, m projections.MemberRow) memberRow {
	row := memberRow{MemberRow: m, LastOwner: m.Role == workspace.RoleOwner && ws.Owners() == 1}
	viewer := q.ws.Role
	if !q.ws.Manages || (m.Role == workspace.RoleOwner && viewer != workspace.RoleOwner) || row.LastOwner {
		return row
	}
	row.Roles, row.MayRemove = grantable(viewer), true
	if !slices.Contains(row.Roles, m.Role) {
		row.Roles = nil // an admin looking at an owner: not theirs to change
	}
	return row
}

// grantable lists the roles someone with role may give.
func grantable(role string) []string {
	var out []string
	for _, r := range []string{workspace.RoleMember, workspace.RoleAdmin, workspace.RoleOwner} {
		if workspace.MayGrant(role, r) {
			out = append(out, r)
		}
	}
	return out
}

func article(role string) string {
	if role == workspace.RoleOwner || role == workspace.RoleAdmin {
		return "an"
	}
	return "a"
}
