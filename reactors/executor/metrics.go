package executor

import "github.com/prometheus/client_golang/prometheus"

// metrics are the executor's /metrics series.
type metrics struct {
	claims prometheus.Counter
	lost   prometheus.Counter
	queued prometheus.Gauge
	rounds roundMetrics
}

// roundMetrics are the charger's series. Its rounds are the one section every execution passes
// through in turn (a workspace's account takes one append at a time). Rounds busy all the
// time, each carrying more charges as load grows, say the process writes its charges back to
// back; whether the rounds or the CPU hold them up, the CPU's use tells (docs/performance.md,
// "Charge rounds": on two shared cores it was the CPU).
type roundMetrics struct {
	seconds  prometheus.Histogram // a round's time, from gathering it to answering its charges
	size     prometheus.Histogram // the charges a round carried
	turnWait prometheus.Histogram // the wait for a turn on contended accounts, rounds that took one
}

// roundSeconds are the buckets of rounds' and turns' times: half a millisecond to a second.
var roundSeconds = prometheus.ExponentialBuckets(0.0005, 2, 12)

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		claims: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_executor_claims_total",
			Help: "Claims of an execution attempt this process tried (alone or with the attempt's outcome)."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_executor_claims_lost_total",
			Help: "Claims that lost: another worker had claimed the execution first (a claim append failed on revision, or the state read showed it taken)."}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchyard_executor_queued",
			Help: "Executions this process has taken that wait for a run slot."}),
		rounds: roundMetrics{
			seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "switchyard_executor_charge_round_seconds",
				Help: "Time of a charge round (the charges and outcomes queued in this process, written in one commit), from gathering it to answering its charges.", Buckets: roundSeconds}),
			size: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "switchyard_executor_charge_round_charges",
				Help: "Charges a charge round carried.", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
			turnWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "switchyard_executor_charge_turn_wait_seconds",
				Help: "Wait of a charge round for its turn on accounts another process charges too.", Buckets: roundSeconds}),
		},
	}
	if reg != nil {
		reg.MustRegister(m.claims, m.lost, m.queued, m.rounds.seconds, m.rounds.size, m.rounds.turnWait)
	}
	return m
}
