package executor

import "github.com/prometheus/client_golang/prometheus"

// metrics are the executor's /metrics series.
type metrics struct {
	claims prometheus.Counter
	lost   prometheus.Counter
	queued prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		claims: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_executor_claims_total",
			Help: "Claims of an execution attempt this process tried (alone or with the attempt's outcome)."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_executor_claims_lost_total",
			Help: "Claims that lost: another worker had claimed the execution first (a claim append failed on revision, or the state read showed it taken)."}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchyard_executor_queued",
			Help: "Executions this process has taken that wait for a run slot."}),
	}
	if reg != nil {
		reg.MustRegister(m.claims, m.lost, m.queued)
	}
	return m
}
