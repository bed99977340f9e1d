// Package server is the HTTP side of `idforge serve`: snowflake and chain IDs
// for callers in any language, decoding, the layout, health and readiness,
// Prometheus metrics, a state page, and the endpoints the proxy store
// (package proxystore) uses to take machine IDs and segment ranges from the
// store behind the server.
//
// Routes (Go's method+path patterns, no framework):
//
//	GET  /v1/ids                 snowflake IDs        ?count=1..10000 &format=decimal|number|radix62|radix36|friendly
//	GET  /v1/ids?kind=uuidv7     version 7 UUIDs      ?count= (canonical form, no format)
//	GET  /v1/ids/{chain}         segment-chain IDs    same parameters (friendly is snowflake-only), or a dated
//	                                                  format: ?format=INV-{yyyy}{MM}{dd}-{seq:6} (URL-encoded)
//	GET  /v1/decode/{id}         an ID's time, machine and sequence   ?format=; a UUIDv7's time
//	GET  /v1/layout              the bit layout, its capacity and expiry, the machine ID
//	GET  /healthz                the process answers
//	GET  /readyz                 the lease is held and the store answers
//	GET  /metrics                Prometheus text format (when Settings.Registry is an *idforge.Registry)
//	GET  /                       the state page (likewise)
//	POST /v1/proxy/...           proxy-store endpoints (only when Settings.Proxy is set)
//
// Responses are JSON unless the client accepts text/plain more than
// application/json, in which case ID lists are one ID a line. Every request
// the server refuses gets a 4xx status and a JSON body {"error": "...",
// "code": "..."}, and an unclean path a JSON 307 to the clean one; a store or
// clock that cannot serve gives 503. Handlers never answer 500: a panic is
// recovered into a 503 and logged. What net/http refuses before the handler
// runs (a malformed request, no Host, headers over the server's limit, an
// unknown Transfer-Encoding or HTTP version, an unmet Expect) gets
// net/http's plain-text answer.
//
// # Threat model
//
// Callers are told apart by their bearer token (Settings.TokensFile); a server without
// tokens has one anonymous caller and should listen on loopback only.
//
//   - Anyone who can connect may call /healthz and /readyz, which say ok or
//     not and nothing else: details go to token holders and to the log.
//     Probes are answered outside every request limit, and readiness is
//     cached for a second, so probes cannot load the store.
//   - A token holder may draw IDs (from the chains its chains= names, all
//     by default), decode, read the layout, the metrics and the state
//     page. Its requests and connections are bounded per token and overall
//     (64 requests and 256 connections a token, 1024 requests and 4096
//     connections in all), and so are the chain names it may open (256
//     beyond the configured ones), so one token's flood leaves others
//     served. Names of dated chains' periods (<chain>:<yyyyMMdd> and the
//     like) are nobody's to draw or fetch: a day's counter cannot be used
//     up by name. No answer or page shows the store's address or key prefix.
//   - Through the proxy a token may only name the namespaces and segments the
//     tokens file gives it. A machine-ID lease belongs to whoever
//     distributed it: the answer carries a secret that its guard and revert
//     must present, a claim of an instance whose lease is live is refused
//     unless it presents the secret and changes nothing the holder depends
//     on, each token holds at most its quota of machine IDs (stable ones
//     counted from the store, so across restarts), and the server's own
//     lease is never reachable. The reclaim cut-off is the server's (every
//     Distribute goes to the store with its safe-guard), steps and
//     timestamps are bounded (10^8 IDs a fetch, 2 s ahead of the server's
//     clock), so no call can burn a sequence, take a live holder's machine
//     ID or poison one for its next holder.
//   - Every lease action and chain opening leaves an audit line with the
//     token's name, as does a draw that nears or passes a sequence's
//     capacity, up to 100 lines a token per 10 s; refused requests, failed
//     authentications included, are counted in metrics and summed up in one
//     log line per token and code per 10 s.
//   - A web page in a browser on the same machine holds no token: the server
//     refuses requests with a foreign Origin or a cross-site
//     Sec-Fetch-Site, POSTs without a JSON content type, and, without
//     tokens, any Host but a loopback name or one of Settings.AllowedHosts,
//     which stops DNS rebinding.
//
// The proxy trusts a token holder with the IDs it draws: a caller that
// breaks its own lease (issues after its lease lapsed) gets duplicates of
// its own. It does not trust one caller with another's lease, namespace,
// sequence or share of the server.
//
// It imports the root package (the Registry and its Stats), engine,
// metrics, the Prometheus client and the top-level internal packages (wire
// types, the error table); nothing imports it but the CLI.
package server
