package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/internal/genreg"
)

// collector reports a registry's figures.
type collector struct {
	reg *idforge.Registry

	issued, idErrors, chainGap, chainDistance, chainStep, chainFetches, chainFailures,
	chainHungry, chainDiscarded, storeDown, leaseID, leaseAge, leaseLost,
	outageServed, outageRefused, outageSeconds, outageEnded *prometheus.Desc
}

// New returns the collector of reg, safe for concurrent use: each scrape
// reads one Registry.Stats. Register it in a prometheus.Registry of your
// own; every metric name starts with "idforge_" (relabel at scrape time to
// change it).
func New(reg *idforge.Registry) prometheus.Collector {
	const ns = "idforge"
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
	}
	return &collector{
		reg:            reg,
		issued:         d("ids_issued_total", "IDs handed out.", "kind", "name"),
		idErrors:       d("id_errors_total", "Draws that failed, by reason.", "kind", "name", "reason"),
		chainGap:       d("chain_head_gap", "IDs a chain has fetched and not handed out yet.", "name"),
		chainDistance:  d("chain_prefetch_distance", "A chain's prefetch distance in segments.", "name"),
		chainStep:      d("chain_step", "IDs per segment.", "name"),
		chainFetches:   d("chain_fetches_total", "Successful segment fetches.", "name"),
		chainFailures:  d("chain_fetch_failures_total", "Failed segment fetches.", "name"),
		chainHungry:    d("chain_hungry_total", "Draws that found no ID ready and waited.", "name"),
		chainDiscarded: d("chain_discarded_total", "Fetched IDs never handed out.", "name"),
		storeDown:      d("store_down_seconds", "Seconds since the store stopped answering, 0 while it answers."),
		leaseID:        d("lease_machine_id", "The machine ID held, -1 when none."),
		leaseAge:       d("lease_heartbeat_age_seconds", "Seconds since the store last confirmed the machine ID."),
		leaseLost:      d("lease_lost_total", "Times the machine ID was found taken over by another instance."),
		outageServed:   d("outage_ids_served", "IDs handed out during the current store outage (0 without one) or the last one that ended.", "outage", "kind"),
		outageRefused:  d("outage_ids_refused", "IDs asked for and refused during the current store outage (0 without one) or the last one that ended.", "outage", "kind"),
		outageSeconds:  d("outage_seconds", "How long the current store outage has lasted (0 without one), or the last one that ended lasted.", "outage"),
		outageEnded:    d("outage_end_timestamp_seconds", "When the last store outage ended, in Unix seconds.", "outage"),
	}
}

// Describe sends the description of every metric.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.issued, c.idErrors, c.chainGap, c.chainDistance, c.chainStep, c.chainFetches,
		c.chainFailures, c.chainHungry, c.chainDiscarded, c.storeDown, c.leaseID, c.leaseAge, c.leaseLost,
		c.outageServed, c.outageRefused, c.outageSeconds, c.outageEnded} {
		ch <- d
	}
}

// Collect reports one Registry.Stats.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.reg.Stats()
	cnt := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, g := range s.Generators {
		cnt(c.issued, g.Issued, g.Kind, g.Name)
		for reason, n := range g.Errors {
			cnt(c.idErrors, n, g.Kind, g.Name, reason)
		}
		if g.Kind == genreg.Chain {
			gauge(c.chainGap, float64(g.Ahead), g.Name)
			gauge(c.chainDistance, float64(g.PrefetchDistance), g.Name)
			gauge(c.chainStep, float64(g.Step), g.Name)
			cnt(c.chainFetches, g.Fetches, g.Name)
			cnt(c.chainFailures, g.Failures, g.Name)
			cnt(c.chainHungry, g.Hungry, g.Name)
			cnt(c.chainDiscarded, g.Discarded, g.Name)
		}
	}
	down := 0.0
	if !s.Outage.Start.IsZero() {
		down = time.Since(s.Outage.Start).Seconds()
	}
	gauge(c.storeDown, down)
	gauge(c.leaseID, float64(s.MachineID))
	if !s.Confirmed.IsZero() {
		gauge(c.leaseAge, time.Since(s.Confirmed).Seconds())
	}
	cnt(c.leaseLost, s.LeaseLost)

	// The current outage's series are there, at 0, while the store answers,
	// so an alert on them needs no absent(); the last outage's appear once
	// one has ended.
	now := time.Now()
	kinds := map[string]bool{}
	for _, g := range s.Generators {
		kinds[g.Kind] = true
	}
	for _, o := range []struct {
		label string
		o     idforge.Outage
	}{{"current", s.Outage}, {"last", s.LastOutage}} {
		if o.label == "last" && o.o.Start.IsZero() {
			continue
		}
		for k := range o.o.Served {
			kinds[k] = true
		}
		for k := range kinds {
			gauge(c.outageServed, float64(o.o.Served[k]), o.label, k)
			gauge(c.outageRefused, float64(o.o.Refused[k]), o.label, k)
		}
		gauge(c.outageSeconds, o.o.Duration(now).Seconds(), o.label)
		if !o.o.End.IsZero() {
			gauge(c.outageEnded, float64(o.o.End.UnixNano())/1e9, o.label)
		}
	}
}
