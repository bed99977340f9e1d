// Package metrics is a Prometheus collector for an idforge registry, for
// library users and for `idforge serve` alike. It reads
// idforge.Registry.Stats at each scrape: it wraps no generator and no
// store, and holds no global state.
//
// It imports the root package, engine, internal/regstats (the chains'
// prefetch detail) and the Prometheus client.
//
//	reg, _ := idforge.New(ctx, idforge.Settings{Store: st})
//	promReg := prometheus.NewRegistry()
//	promReg.MustRegister(metrics.New(reg))
//	http.Handle("/metrics", promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}))
//
// Metrics (every name starts with "idforge_"):
//
//	ids_issued_total{kind,name}                 IDs handed out
//	id_errors_total{kind,name,reason}           failed draws by reason (clock_backwards, machine_id_lost, store_unavailable, ...)
//	chain_head_gap{name}                        IDs fetched and not handed out yet (how far the chain is ahead)
//	chain_prefetch_distance{name}               prefetch distance in segments (grows while callers are hungry)
//	chain_step{name}                            IDs per segment
//	chain_fetches_total{name}                   successful segment fetches
//	chain_fetch_failures_total{name}            failed segment fetches
//	chain_hungry_total{name}                    draws that found no ID ready and waited
//	chain_discarded_total{name}                 fetched IDs never handed out (TTL, Close)
//	store_down_seconds                          how long the store has not answered, 0 while it answers
//	lease_machine_id                            the machine ID held, -1 when none
//	lease_heartbeat_age_seconds                 time since the store last confirmed the machine ID
//	lease_lost_total                            times the machine ID was found taken over
package metrics
