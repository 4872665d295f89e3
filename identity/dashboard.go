package identity

import "github.com/gorilla/mux"

// mountDashboard adds the developer dashboard, the staff review queue and the connected-apps
// pages.
func (p *Provider) mountDashboard(root *mux.Router) {}
