// Package metrics is a Prometheus collector for an idforge registry, for
// library users and for `idforge serve` alike. It reads
// idforge.Registry.Stats at each scrape: it wraps no generator and no
// store, and holds no global state.
//
// It imports the root package, internal/genreg (the kinds' names) and the
// Prometheus client.
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
//	outage_ids_served{outage,kind}              IDs handed out during the store outage
//	outage_ids_refused{outage,kind}             IDs asked for and refused during it
//	outage_seconds{outage}                      how long it has lasted (current) or lasted (last)
//	outage_end_timestamp_seconds{outage}        when it ended, in Unix seconds (last only)
//
// An outage runs from the first store call that fails as unavailable (or
// past its deadline) to the next call the store answers. The outage label
// is "current" for the one going on, whose series read 0 while the store
// answers, and "last" for the last one that ended, whose series appear
// once one has. The kind label is the generator kind (snowflake, uuidv7,
// chain, segment): snowflake IDs ride through an outage on the lease, and
// chains serve what they fetched ahead, so the sum over kinds is what the
// registry served; dated chains are not counted there.
package metrics
