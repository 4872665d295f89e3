package postgres

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// registerMetrics exposes group commit and log tail figures on r. Only one Store per
// registry: a second one's metrics are not registered (it logs why).
func (s *Store) registerMetrics(r prometheus.Registerer) {
	counter := func(name, help string, f func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	cs := []prometheus.Collector{
		counter("switchyard_eventstore_group_commits_total", "Transactions that concurrent appends were grouped into (a lone append is a group of one).", s.group.groups.Load),
		counter("switchyard_eventstore_group_appends_total", "Appends carried by group commits; divided by group_commits_total, the mean group size.", s.group.appends.Load),
		counter("switchyard_eventstore_group_fallbacks_total", "Appends whose group was rolled back (an event id stored elsewhere, a deadlock) and that went again alone.", s.group.fallbacks.Load),
		counter("switchyard_eventstore_log_reads_total", "Reads of the log made for subscriptions: by the shared tail and by subscriptions catching up.", s.subscriptionReads.Load),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchyard_eventstore_tail_members", Help: "Subscriptions fed by the shared log tail (the others are catching up on their own)."},
			func() float64 { return float64(s.tail.memberCount()) }),
	}
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				s.log.WithError(err).Warn("register event store metrics")
			}
			return
		}
	}
}

func (t *tail) memberCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.members)
}
