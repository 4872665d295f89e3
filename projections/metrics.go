package projections

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	applied   *prometheus.CounterVec
	batches   *prometheus.CounterVec
	batchTime *prometheus.HistogramVec
	delay     *prometheus.HistogramVec
	lastEvent *prometheus.GaugeVec
	failed    *prometheus.GaugeVec
	retries   *prometheus.CounterVec
	running   *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_projection_events_applied_total", Help: "Events applied by each projector.",
		}, []string{"projector"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_projection_batches_total", Help: "Batches committed by each projector.",
		}, []string{"projector"}),
		batchTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchyard_projection_batch_seconds", Help: "Time to apply and commit one batch.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"projector"}),
		delay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchyard_projection_lag_seconds", Help: "Age of each event when its projector committed it (append to read model).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"projector"}),
		lastEvent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_projection_last_event_timestamp_seconds", Help: "Append time of the last event each projector applied.",
		}, []string{"projector"}),
		failed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_projection_failed", Help: "1 when the projector stopped on an event it cannot apply.",
		}, []string{"projector"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_projection_retries_total", Help: "Batches retried after a transient error.",
		}, []string{"projector"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_projection_running", Help: "1 while this instance holds the projector's lock and runs it.",
		}, []string{"projector"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.applied, m.batches, m.batchTime, m.delay, m.lastEvent, m.failed, m.retries, m.running} {
			reg.MustRegister(c)
		}
	}
	return m
}
