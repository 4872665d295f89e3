package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/switchyard/switchyard/domain"
	"github.com/switchyard/switchyard/domain/access"
	"github.com/switchyard/switchyard/domain/workspace"
	"github.com/switchyard/switchyard/projections"
)

type membersData struct {
	List []projections.MemberRow
	// Roles are the roles the viewer may give.
	Roles []string
	Email string
}

// members lists the workspace's members; owners and admins add people by email.
func (c *Console) members(q *request) {
	var d membersData
	notice, errText, status := "", "", http.StatusOK
	if q.r.Method == http.MethodPost {
		if !c.requireManage(q) {
			return
		}
		email, role := strings.TrimSpace(q.r.PostForm.Get("email")), q.r.PostForm.Get("role")
		err := c.addMember(q, email, role)
		switch {
		case err == nil:
			notice = email + " is now " + article(role) + " " + role + " of " + q.ws.Name + "."
		case errors.Is(err, domain.ErrNotFound):
			status, errText, d.Email = http.StatusBadRequest, "No account has the email "+email+": they need to sign up first.", email
		default:
			status, _, errText = words(err, q.ws.Role)
			d.Email = email
		}
	}
	list, err := c.q.MembersOf(q.ctx(), q.ws.ID)
	if err != nil {
		c.fail(q, err)
		return
	}
	d.List = list
	for _, r := range []string{workspace.RoleMember, workspace.RoleAdmin, workspace.RoleOwner} {
		if access.MayGrant(q.ws.Role, r) {
			d.Roles = append(d.Roles, r)
		}
	}
	c.renderView(q, status, "members", "Members", d, notice, errText)
}

func (c *Console) addMember(q *request, email, role string) error {
	if email == "" {
		return domain.Invalid("email", "is required")
	}
	if !workspace.ValidRole(role) {
		return domain.Invalid("role", "must be owner, admin or member")
	}
	if !access.MayGrant(q.ws.Role, role) {
		return domain.Forbidden("a %s cannot make someone %s %s", q.ws.Role, article(role), role)
	}
	return c.cmds.Workspaces.AddMember(q.acting(), q.ws.ID, email, role)
}

func article(role string) string {
	if role == workspace.RoleOwner || role == workspace.RoleAdmin {
		return "an"
	}
	return "a"
}
