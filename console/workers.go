package console

import (
	"net/http"
	"time"
)

// Worker is a worker the workers page lists: its id, the modules it polls for, the tasks it
// holds and when it last polled.
type Worker struct {
	ID       string
	Modules  []string
	InFlight int
	LastPoll time.Time
}

type workersData struct {
	List []Worker
}

// workers lists the workers that polled for the workspace's tasks in the last minute.
func (c *Console) workers(q *request) {
	var d workersData
	if c.cfg.Workers != nil {
		d.List = c.cfg.Workers(q.ws.ID)
	}
	c.render(q, http.StatusOK, "workers", "Workers", d)
}
