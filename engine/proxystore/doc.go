// Package proxystore is a store that takes machine IDs and segment ranges
// from `idforge serve -proxy` over HTTP, so services that must not hold
// database credentials still generate IDs in process at full speed: only
// machine-ID leases and segment fetches cross the network, every ID is
// drawn locally.
//
//	st, err := proxystore.New(proxystore.Settings{URL: "http://ids.internal:8080", Token: token})
//	reg, err := idforge.New(ctx, idforge.Settings{Store: st, Namespace: "orders"})
//
// A [Store] implements the root store contract (machine.Distributor and
// Segment) and passes the same contract suites as the SQL and Redis stores.
// Errors keep their meaning across the wire: they wrap the same engine
// sentinels (ErrMachineIDLost, ErrMachineIDOverflow, ErrInvalidConfig,
// ErrStoreReset, ErrNoFloor), a segment the server does not serve (not on
// its -chains list, or past its 256-chain cap) gives engine.ErrUnknownGenerator,
// and a server that cannot be reached or answers garbage gives
// engine.ErrStoreUnavailable. A segment chain fails at once on the
// refusals and rides out only the outages.
//
// The server's store waits its reset grace (2 s by default) after a reset
// before it hands out again, so a client cut off from the server must stop
// issuing sooner. The server sends that grace with every machine ID it
// hands out, and a Store reports it in its Terms (ResetGrace), so the
// registry's lease refuses to outlive it, as on the SQL and Redis stores.
// It sends the store's ride-through window too (RideThrough), which the client's
// lease reserves ahead as a lease on the store itself would. A server from
// before this (no reset_grace_ms in its answer) reports none, and nothing
// is checked.
//
// A lease belongs to the process that distributed it: the server hands it a
// secret with the machine ID (machine.State.Holder), which its guards and
// reverts present; the server refuses them from anyone else, and refuses a
// second process claiming an instance whose lease is live. A Store presents
// the secret of its lease of an instance when it asks for that instance
// again, so its own lease may ask again where a second process may not.
// The token must be allowed the namespaces and segments the Store uses (see
// server.Settings.TokensFile). The server reclaims a silent machine ID
// after its own safe-guard (5 minutes for `idforge serve`) whatever the
// claimant asks, and refuses a lease whose SafeGuard is longer.
//
// The sequences of dated chains' periods (<chain>:<yyyyMMdd> and the like)
// are the server's: a Registry on a proxy store cannot draw dated chains
// (its fetches are refused with engine.ErrInvalidConfig); draw them from
// the server's /v1/ids/{chain}.
//
// It imports engine and the top-level internal/wire (the wire types it
// shares with package server) and internal/reason (the error table), never
// the server itself.
package proxystore
