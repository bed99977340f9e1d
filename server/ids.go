package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/convert"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/dated"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/idgen"
	"github.com/idforge/idforge/internal/snowlayout"
	"github.com/idforge/idforge/internal/uuidv7"
	"github.com/idforge/idforge/internal/wire"
)

// httpError is a refusal: status, a machine-readable code and a message,
// and for the log only, the detail of what failed (an engine error's text,
// which may name the store's address).
type httpError struct {
	status  int
	code    string
	message string
	detail  string
}

func badRequest(code, format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeErrorDetail(w, status, code, msg, "")
}

// writeErrorDetail answers with an error, and counts it against the
// request's caller when it is a refusal (4xx, 5xx), with detail, or msg,
// for the log.
func writeErrorDetail(w http.ResponseWriter, status int, code, msg, detail string) {
	if rp, ok := w.(*reply); ok && status >= 400 {
		name := ""
		if rp.c != nil {
			name = rp.c.name
		}
		if detail == "" {
			detail = msg
		}
		rp.s.ledger.refuse(name, code, status, rp.r, detail)
	}
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}

func (e *httpError) write(w http.ResponseWriter) {
	writeErrorDetail(w, e.status, e.code, e.message, e.detail)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only our own types are written: cannot happen
		status, b = http.StatusServiceUnavailable, []byte(`{"error":"encoding the answer failed","code":"internal"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// idFormat turns IDs into text for one request.
type idFormat struct {
	quoted bool // JSON string rather than number
	f      snowlayout.Formatter
}

// formatters are built once; Radix formatters are safe for concurrent use.
type formatters struct {
	r62, r36 snowlayout.Formatter
	friendly snowlayout.Formatter
}

func newFormatters(l snowflake.Layout) formatters {
	r62, _ := convert.New("radix62", convert.Settings{Padded: true})
	r36, _ := convert.New("radix36", convert.Settings{Padded: true})
	return formatters{r62: r62, r36: r36, friendly: snowlayout.FriendlyFormat(l)}
}

func (s *Server) format(name string, snowflakeIDs bool) (idFormat, *httpError) {
	switch name {
	case "", "decimal":
		return idFormat{quoted: true}, nil
	case "number":
		return idFormat{}, nil
	case "radix62":
		return idFormat{quoted: true, f: s.fmts.r62}, nil
	case "radix36":
		return idFormat{quoted: true, f: s.fmts.r36}, nil
	case "friendly":
		if snowflakeIDs {
			return idFormat{quoted: true, f: s.fmts.friendly}, nil
		}
		return idFormat{}, badRequest("bad_format", "format \"friendly\" is for snowflake IDs only; chain IDs take decimal, number, radix62 or radix36")
	}
	return idFormat{}, badRequest("bad_format", "unknown format %s (known: %s)", quoteBounded(name), strings.Join(wire.Formats, ", "))
}

// repeated refuses a query parameter given twice: which one counts would be
// a guess, and proxies and clients guess differently.
func repeated(name string) *httpError {
	return badRequest("bad_parameter", "parameter %s given more than once; give it once", quoteBounded(name))
}

func (f idFormat) append(b []byte, id int64) []byte {
	if f.f != nil {
		return append(b, f.f.Format(id)...)
	}
	return strconv.AppendInt(b, id, 10)
}

// idQuery is the parsed ?count=, ?format= and ?kind= of an ID request.
type idQuery struct {
	count int
	text  bool
	f     idFormat
	kind  string // /v1/ids: genreg.Snowflake or genreg.UUIDv7
	dated string // a chain's dated format, given or configured
}

// maxFormat bounds a dated format given in a query: long enough for any
// sensible one, short enough to quote back.
const maxFormat = maxEcho

func (s *Server) parseIDQuery(r *http.Request, snowflakeIDs bool) (idQuery, *httpError) {
	q := idQuery{count: 1, text: wantsText(r.Header.Get("Accept")), kind: genreg.Snowflake}
	var format string
	var seenCount, seenFormat, seenKind bool
	// Parse the query by hand: url.Values allocates a map per request.
	for raw := r.URL.RawQuery; raw != ""; {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "count":
			if seenCount {
				return q, repeated(k)
			}
			seenCount = true
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > wire.MaxCount || v[0] == '+' {
				return q, badRequest("bad_count", "count=%s: want a whole number from 1 to %d", quoteBounded(v), wire.MaxCount)
			}
			q.count = n
		case "format":
			if seenFormat {
				return q, repeated(k)
			}
			seenFormat, format = true, v
			if strings.Contains(v, "%") { // {yyyy} arrives as %7Byyyy%7D
				var err error
				if format, err = url.QueryUnescape(v); err != nil {
					return q, badRequest("bad_format", "format=%s: not a valid URL-encoded value", quoteBounded(v))
				}
			}
		case "kind":
			if !snowflakeIDs {
				return q, badRequest("bad_parameter", "unknown parameter \"kind\" (known on /v1/ids/{chain}: count, format)")
			}
			if seenKind {
				return q, repeated(k)
			}
			seenKind = true
			if v != genreg.Snowflake && v != genreg.UUIDv7 {
				return q, badRequest("bad_kind", "kind=%s: want %s (the default) or %s", quoteBounded(v), genreg.Snowflake, genreg.UUIDv7)
			}
			q.kind = v
		default:
			known := "count, format"
			if snowflakeIDs {
				known += ", kind"
			}
			return q, badRequest("bad_parameter", "unknown parameter %s (known: %s)", quoteBounded(k), known)
		}
	}
	switch {
	case q.kind == genreg.UUIDv7 && format != "":
		return q, badRequest("bad_format", "kind=uuidv7 takes no format: UUIDs come in their canonical 36-character form")
	case q.kind == genreg.UUIDv7:
		q.f = idFormat{quoted: true}
		return q, nil
	case dated.IsFormat(format) && snowflakeIDs:
		return q, badRequest("bad_format", "a dated format is for chains: /v1/ids/{chain}?format=...")
	case dated.IsFormat(format) && len(format) > maxFormat:
		return q, badRequest("bad_format", "format: a dated format of %d bytes; at most %d", len(format), maxFormat)
	case dated.IsFormat(format):
		q.dated, q.f = format, idFormat{quoted: true}
		return q, nil
	}
	f, herr := s.format(format, snowflakeIDs)
	if herr != nil {
		return q, herr
	}
	q.f = f
	return q, nil
}

// wantsText reports whether the Accept header prefers text/plain to JSON:
// the media range with the highest q wins, the earlier one among equals, and
// */* or no header means JSON.
func wantsText(accept string) bool {
	if accept == "" {
		return false
	}
	best, bestQ := "", -1.0
	for part := range strings.SplitSeq(accept, ",") {
		media, params, _ := strings.Cut(part, ";")
		media = strings.ToLower(strings.TrimSpace(media))
		if media != "text/plain" && media != "application/json" && media != "text/*" && media != "application/*" && media != "*/*" {
			continue
		}
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.TrimSpace(k) == "q" {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		if q > bestQ {
			best, bestQ = media, q
		}
	}
	return bestQ > 0 && (best == "text/plain" || best == "text/*")
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (s *Server) handleSnowflake(w http.ResponseWriter, r *http.Request) {
	q, herr := s.parseIDQuery(r, true)
	if herr != nil {
		herr.write(w)
		return
	}
	c := callerOf(w)
	if q.kind == genreg.UUIDv7 {
		s.serveUUIDs(w, r, c, q)
		return
	}
	g, err := s.snowflake(r.Context())
	if err != nil {
		s.generatorError(c, "", err).write(w)
		return
	}
	s.serveIDs(w, r, c, "", g, q)
}

func (s *Server) handleChain(w http.ResponseWriter, r *http.Request) {
	q, herr := s.parseIDQuery(r, false)
	if herr != nil {
		herr.write(w)
		return
	}
	name, c := r.PathValue("chain"), callerOf(w)
	switch {
	case validName(name) && derived(name):
		refusal(http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("name %q: %s", name, reservedRule)).write(w)
		return
	case !c.chains.allows(name):
		refusal(http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("this token may not draw chain %s (see chains= in the tokens file)", quoteBounded(name))).write(w)
		return
	}
	f := s.dated[name]
	if f != nil {
		if q.dated != f.String() && (q.dated != "" || q.f != (idFormat{quoted: true})) {
			badRequest("bad_format", "chain %q is served in its configured format %s only", name, quoteBounded(f.String())).write(w)
			return
		}
	} else if q.dated != "" {
		var err error
		if f, err = dated.Parse(q.dated); err != nil {
			badRequest("bad_format", "%v", err).write(w)
			return
		}
	}
	if f != nil {
		s.serveDated(w, r, c, name, f, q)
		return
	}
	g, herr := s.chain(r.Context(), c, name)
	if herr != nil {
		herr.write(w)
		return
	}
	s.serveIDs(w, r, c, name, g, q)
}

// serveUUIDs writes q.count UUIDs of kind uuidv7.
func (s *Server) serveUUIDs(w http.ResponseWriter, r *http.Request, c *caller, q idQuery) {
	g, err := genreg.UUIDOf(r.Context(), s.cfg.Registry, genreg.UUIDv7, "")
	if err != nil {
		s.generatorError(c, genreg.UUIDv7, err).write(w)
		return
	}
	b, herr := s.drawStrings(r.Context(), c, genreg.UUIDv7, q, func(ctx context.Context) (string, error) {
		u, err := g.NextUUID(ctx)
		return uuid.UUID(u).String(), err
	})
	if herr != nil {
		herr.write(w)
		return
	}
	writeIDs(w, q.text, b)
}

// serveDated writes q.count numbers of the dated chain name in format f.
// A draw that brings the period's counter near what f holds, or past it,
// leaves an audit line: a dated chain that runs out refuses every draw
// until the period ends.
func (s *Server) serveDated(w http.ResponseWriter, r *http.Request, c *caller, name string, f *dated.Format, q idQuery) {
	if herr := s.admit(c, name); herr != nil {
		herr.write(w)
		return
	}
	g, err := idgen.Dated(s.cfg.Registry, name, f.String())
	if err != nil {
		s.generatorError(c, name, err).write(w)
		return
	}
	var last string
	b, herr := s.drawStrings(r.Context(), c, name, q, func(ctx context.Context) (string, error) {
		v, err := g(ctx)
		last = v
		return v, err
	})
	if herr != nil {
		herr.write(w)
		return
	}
	if key, n, err := f.Read(last); err == nil && near(n, f.Max()) {
		s.ledger.audit(c.name, slog.LevelWarn, "idforge serve: sequence near its capacity", "token", c.name, "name", name, "period", key,
			"counter", n, "capacity", f.Max(), "count", q.count)
	}
	writeIDs(w, q.text, b)
}

// near reports whether counter n is within the last tenth of capacity.
func near(n, capacity int64) bool { return n > capacity-capacity/10 }

// drawStrings draws q.count strings from next, for chain name, into the
// answer's body: JSON {"ids":[... or text, one a line. An error returns
// nothing of what was drawn.
func (s *Server) drawStrings(ctx context.Context, c *caller, name string, q idQuery, next func(context.Context) (string, error)) ([]byte, *httpError) {
	var b []byte
	if !q.text {
		b = append(b, `{"ids":[`...)
	}
	for i := range q.count {
		v, err := next(ctx)
		if err != nil {
			return nil, s.generatorError(c, name, err)
		}
		switch {
		case q.text:
			b = append(append(b, v...), '\n')
		default:
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, v) // the grammars leave nothing to escape
		}
	}
	return b, nil
}

// serveIDs draws q.count IDs from g, chain name ("" for snowflake IDs), and
// writes them: JSON {"ids":[...]} or text, one a line.
func (s *Server) serveIDs(w http.ResponseWriter, r *http.Request, c *caller, name string, g engine.Generator, q idQuery) {
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]
	defer func() {
		if cap(b) <= 64<<10 {
			*bp = b[:0]
			bufPool.Put(bp)
		}
	}()
	ids, err := s.draw(r.Context(), g, q.count)
	if err != nil {
		s.generatorError(c, name, err).write(w)
		return
	}
	defer putIDs(ids)
	if last := (*ids)[len(*ids)-1]; name != "" && near(last, math.MaxInt64) {
		s.ledger.audit(c.name, slog.LevelWarn, "idforge serve: sequence near its capacity", "token", c.name, "name", name, "counter", last,
			"capacity", int64(math.MaxInt64), "count", q.count)
	}
	if !q.text {
		b = append(b, `{"ids":[`...)
	}
	for i, id := range *ids {
		switch {
		case q.text:
			b = q.f.append(b, id)
			b = append(b, '\n')
		default:
			if i > 0 {
				b = append(b, ',')
			}
			if q.f.quoted {
				b = append(b, '"')
				b = q.f.append(b, id)
				b = append(b, '"')
			} else {
				b = q.f.append(b, id)
			}
		}
	}
	writeIDs(w, q.text, b)
}

// Header values shared by every answer (net/http only reads them).
var (
	textPlain = []string{"text/plain; charset=utf-8"}
	appJSON   = []string{"application/json"}
	noStore   = []string{"no-store"}
)

// batchGenerator is a generator that draws several IDs in one call. The
// server uses it when a Registry's generator has it (an *idforge.Registry's
// do, counting a batch once).
type batchGenerator interface {
	// NextIDs fills dst with new IDs. On an error it returns how many were
	// drawn before it; those IDs are lost to the caller.
	NextIDs(ctx context.Context, dst []int64) (int, error)
}

var idPool = sync.Pool{New: func() any { s := make([]int64, 0, 64); return &s }}

func putIDs(ids *[]int64) {
	if cap(*ids) <= wire.MaxCount {
		idPool.Put(ids)
	}
}

// draw takes n IDs from g.
func (s *Server) draw(ctx context.Context, g engine.Generator, n int) (*[]int64, error) {
	ids := idPool.Get().(*[]int64)
	if cap(*ids) < n {
		*ids = make([]int64, n)
	}
	*ids = (*ids)[:n]
	if bg, ok := g.(batchGenerator); ok {
		if _, err := bg.NextIDs(ctx, *ids); err != nil {
			putIDs(ids)
			return nil, err
		}
		return ids, nil
	}
	for i := range *ids {
		id, err := g.NextID(ctx)
		if err != nil {
			putIDs(ids)
			return nil, err
		}
		(*ids)[i] = id
	}
	return ids, nil
}

// decoded is /v1/decode's answer.
type decoded struct {
	ID        engine.ID `json:"id"`
	Timestamp string    `json:"timestamp"`
	Machine   int64     `json:"machine"`
	Sequence  int64     `json:"sequence"`
	Friendly  string    `json:"friendly"`
}

const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

func (s *Server) handleDecode(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("id")
	q := r.URL.Query()
	format := q.Get("format")
	for k, v := range q {
		switch {
		case k != "format":
			badRequest("bad_parameter", "unknown parameter %s (known: format)", quoteBounded(k)).write(w)
			return
		case len(v) > 1:
			repeated(k).write(w)
			return
		}
	}
	if u, err := uuid.Parse(raw); err == nil && len(raw) == 36 && format == "" {
		s.decodeUUID(w, raw, u)
		return
	}
	if format == "" {
		format = "decimal"
		if strings.Contains(strings.TrimPrefix(raw, "-"), "-") {
			format = "friendly"
		}
	}
	if format == "number" {
		format = "decimal"
	}
	f, herr := s.format(format, true)
	if herr != nil {
		herr.write(w)
		return
	}
	var id int64
	if f.f != nil {
		var err error
		if id, err = f.f.Parse(raw); err != nil {
			badID(raw, format, err).write(w)
			return
		}
	} else if id, herr = parseDecimal(raw); herr != nil {
		herr.write(w)
		return
	}
	at, machine, seq, err := s.cfg.Layout.Decode(id)
	if err != nil {
		badID(raw, format, err).write(w)
		return
	}
	writeJSON(w, http.StatusOK, decoded{
		ID:        engine.ID(id),
		Timestamp: at.UTC().Format(timestampLayout),
		Machine:   machine,
		Sequence:  seq,
		Friendly:  snowlayout.Friendly(s.cfg.Layout, id),
	})
}

// decodedUUID is /v1/decode's answer for a version 7 UUID.
type decodedUUID struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Timestamp string `json:"timestamp"`
}

// decodeUUID answers with the time of a version 7 UUID.
func (s *Server) decodeUUID(w http.ResponseWriter, raw string, u uuid.UUID) {
	at, err := uuidv7.Time(u)
	if err != nil {
		badRequest("bad_id", "id %s: a version %d UUID carries no time; only version 7 UUIDs decode", quoteBounded(raw), u.Version()).write(w)
		return
	}
	writeJSON(w, http.StatusOK, decodedUUID{ID: u.String(), Kind: genreg.UUIDv7, Timestamp: at.Format(timestampLayout)})
}

// parseDecimal reads a decimal ID. A digit-only string may be a radix ID
// too, so the format is never guessed: the refusal says how to name it.
func parseDecimal(raw string) (int64, *httpError) {
	id, err := strconv.ParseInt(raw, 10, 64)
	switch {
	case err == nil:
		return id, nil
	case errors.Is(err, strconv.ErrRange):
		return 0, badRequest("bad_id", "id %s: outside the 64-bit range", quoteBounded(raw))
	}
	return 0, badRequest("bad_id", "id %s: not a decimal ID; for radix62 or radix36 IDs add ?format=radix62 or ?format=radix36", quoteBounded(raw))
}

// badID refuses an ID that format could not read or the layout decode. The
// error may quote the ID: it is shown only when the ID is short enough to
// be quoted whole.
func badID(raw, format string, err error) *httpError {
	if len(raw) > maxEcho {
		return badRequest("bad_id", "id %s: not a valid %s ID", quoteBounded(raw), format)
	}
	return badRequest("bad_id", "%v", err)
}

// layoutInfo is /v1/layout's answer.
type layoutInfo struct {
	Name          string   `json:"name,omitempty"`
	Layout        string   `json:"layout"`
	Epoch         string   `json:"epoch"`
	Unit          string   `json:"unit"`
	TimestampBits int      `json:"timestamp_bits"`
	MachineBits   int      `json:"machine_bits"`
	SequenceBits  int      `json:"sequence_bits"`
	IDsPerTick    int64    `json:"ids_per_tick"`
	IDsPerSecond  int64    `json:"ids_per_second"`
	Machines      int64    `json:"machines"`
	MaxID         string   `json:"max_id"`
	Expiry        string   `json:"expiry"`
	YearsLeft     int64    `json:"years_left"`
	MachineID     int64    `json:"machine_id"`
	MaxCount      int      `json:"max_count"`
	Formats       []string `json:"formats"`
}

func (s *Server) handleLayout(w http.ResponseWriter, r *http.Request) {
	l := s.cfg.Layout
	writeJSON(w, http.StatusOK, layoutInfo{
		Name:          layoutName(l),
		Layout:        snowlayout.Describe(l),
		Epoch:         l.Epoch.UTC().Format(timestampLayout),
		Unit:          snowlayout.UnitName(l),
		TimestampBits: l.TimestampBits,
		MachineBits:   l.MachineBits,
		SequenceBits:  l.SequenceBits,
		IDsPerTick:    snowlayout.IDsPerTick(l),
		IDsPerSecond:  snowlayout.IDsPerSecond(l),
		Machines:      snowlayout.MaxMachineID(l) + 1,
		MaxID:         strconv.FormatInt(snowlayout.MaxID(l), 10),
		Expiry:        snowlayout.Expiry(l).UTC().Format(timestampLayout),
		YearsLeft:     int64(time.Until(snowlayout.Expiry(l)).Hours() / (24 * 365.25)),
		MachineID:     s.machineID(),
		MaxCount:      wire.MaxCount,
		Formats:       wire.Formats,
	})
}

// writeIDs answers with the IDs written into b: plain text lines, or the
// JSON object whose list b opened and this closes.
func writeIDs(w http.ResponseWriter, text bool, b []byte) {
	h := w.Header()
	if text {
		h["Content-Type"] = textPlain
	} else {
		b = append(b, "]}\n"...)
		h["Content-Type"] = appJSON
	}
	h["Cache-Control"] = noStore
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// layoutName names l on /v1/layout: the name `idforge serve -layout`
// gives it, "custom" for another.
func layoutName(l snowflake.Layout) string {
	switch l {
	case snowflake.Default:
		return "default"
	case snowflake.Seconds:
		return "second"
	case snowflake.JSSafe:
		return "jssafe"
	case snowflake.JSSafeSeconds:
		return "jssafe-second"
	}
	return "custom"
}

// refusal is an httpError without detail.
func refusal(status int, code, message string) *httpError {
	return &httpError{status: status, code: code, message: message}
}
