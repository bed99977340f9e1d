package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/idforge/idforge/engine"
)

// tokenSet are the bearer tokens callers may present, one per caller, each
// with what its caller may do through the proxy. The server compares hashes
// of the presented token with every known token in constant time, so
// neither a token nor its length leaks through timing. A nil *tokenSet
// admits every request, as one anonymous caller that may use every
// namespace and segment.
type tokenSet struct {
	callers []*caller
	hashes  [][sha256.Size]byte
}

// caller is one token's holder and what it may do through the proxy.
type caller struct {
	name string
	// namespaces are the machine-ID namespaces its proxy leases may name,
	// segments the sequences it may fetch from; none unless the tokens file
	// lists them. chains are the chains it may draw on /v1/ids/{chain};
	// every chain the server serves unless the tokens file lists them.
	namespaces, segments, chains access
	// machines is its quota of machine IDs through the proxy; 0 means
	// the default of 256.
	machines int
}

// anonymous is the caller of a server without tokens, which is loopback
// only unless the operator says otherwise (see Settings.AllowedHosts).
var anonymous = &caller{name: "", namespaces: access{all: true}, segments: access{all: true}, chains: access{all: true}}

// access is a list of names, or every name.
type access struct {
	all   bool
	names map[string]bool
}

func (a access) allows(name string) bool { return a.all || a.names[name] }

// readTokens reads a tokens file (Settings.TokensFile). Each line is one
// caller:
//
//	name token [namespaces=a,b|*] [segments=a,b|*] [chains=a,b|*] [machines=N]
//
// or a bare token (named after its line number, with no proxy rights);
// fields are separated by white space, blank lines and lines starting with
// # are skipped. namespaces lists the machine-ID namespaces the caller's
// proxy leases may name and segments the sequences it may fetch through the
// proxy ("*": any); a caller without them may not use the proxy. chains
// lists the chains it may draw on the ID routes (default: every chain the
// server serves). machines is its quota of machine IDs held through the
// proxy (default 256). Tokens shorter than 16 bytes, repeated names or
// tokens, and unknown options are refused. An empty file is an error: it
// would lock every caller out. On Unix the file must be a regular file
// (a symbolic link to one will do) owned by the server's user or root,
// which group and others may neither read nor write, since whoever reads it
// can act as every caller in it and whoever writes it can add callers; it
// is opened without blocking, so a FIFO in its place is refused rather than
// waited on. Every error wraps engine.ErrInvalidConfig.
func readTokens(path string) (*tokenSet, error) {
	f, err := openTokens(path)
	if err != nil {
		return nil, fmt.Errorf("%w: tokens file (Settings.TokensFile): %v", engine.ErrInvalidConfig, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: tokens file (Settings.TokensFile): %v", engine.ErrInvalidConfig, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: tokens file (Settings.TokensFile) %s: a %s, not a regular file", engine.ErrInvalidConfig, path, fileKind(fi.Mode()))
	}
	if runtime.GOOS != "windows" {
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return nil, fmt.Errorf("%w: tokens file (Settings.TokensFile) %s: mode %04o lets group or others read or write it; chmod 600 it (or 400)",
				engine.ErrInvalidConfig, path, perm)
		}
		if err := checkOwner(fi); err != nil {
			return nil, fmt.Errorf("%w: tokens file (Settings.TokensFile) %s: %v", engine.ErrInvalidConfig, path, err)
		}
	}
	// A regular file this large is no tokens file; reading it whole would
	// cost memory for nothing.
	return parseTokens(io.LimitReader(f, maxTokensFile))
}

// maxTokensFile bounds what readTokens reads: 1 MiB holds some ten
// thousand callers.
const maxTokensFile = 1 << 20

// fileKind names a file mode's type for an error.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// parseTokens reads tokens in the format of readTokens.
func parseTokens(r io.Reader) (*tokenSet, error) {
	t := &tokenSet{}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		c := &caller{chains: access{all: true}}
		var tok string
		switch len(fields) {
		case 1:
			c.name, tok = "line-"+strconv.Itoa(n), fields[0]
		default:
			c.name, tok = fields[0], fields[1]
			if err := c.parseOptions(fields[2:]); err != nil {
				return nil, fmt.Errorf("%w: tokens line %d: %v", engine.ErrInvalidConfig, n, err)
			}
		}
		if len(tok) < 16 {
			return nil, fmt.Errorf("%w: tokens line %d: a token needs at least 16 characters", engine.ErrInvalidConfig, n)
		}
		h := sha256.Sum256([]byte(tok))
		switch {
		case names[c.name]:
			return nil, fmt.Errorf("%w: tokens line %d: name %q repeated: names tell callers apart in quotas and logs", engine.ErrInvalidConfig, n, c.name)
		case hashes[h]:
			return nil, fmt.Errorf("%w: tokens line %d: a token repeated from an earlier line", engine.ErrInvalidConfig, n)
		}
		names[c.name], hashes[h] = true, true
		t.callers = append(t.callers, c)
		t.hashes = append(t.hashes, h)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: tokens: %v", engine.ErrInvalidConfig, err)
	}
	if len(t.hashes) == 0 {
		return nil, fmt.Errorf("%w: tokens: no token found", engine.ErrInvalidConfig)
	}
	return t, nil
}

// parseOptions reads the key=value options after a caller's token.
func (c *caller) parseOptions(opts []string) error {
	seen := map[string]bool{}
	for i, o := range opts {
		k, v, ok := strings.Cut(o, "=")
		switch {
		case !ok: // not quoted: it may be a piece of a token with a space in it
			return fmt.Errorf("field %d is no option (want namespaces=a,b, segments=a,b, chains=a,b or machines=N; a token has no white space)", i+3)
		case seen[k]:
			return fmt.Errorf("option %s given twice", quoteBounded(k))
		}
		seen[k] = true
		var err error
		switch k {
		case "namespaces":
			c.namespaces, err = parseAccess(v)
		case "segments":
			c.segments, err = parseAccess(v)
		case "chains":
			c.chains, err = parseAccess(v)
		case "machines":
			c.machines, err = strconv.Atoi(v)
			if err != nil || c.machines < 1 {
				err = fmt.Errorf("machines=%s: want a whole number above 0", v)
			}
		default:
			err = fmt.Errorf("unknown option %s (known: namespaces, segments, chains, machines)", quoteBounded(k))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parseAccess reads "*" or a comma-separated list of names.
func parseAccess(v string) (access, error) {
	if v == "*" {
		return access{all: true}, nil
	}
	a := access{names: map[string]bool{}}
	for n := range strings.SplitSeq(v, ",") {
		if !validName(n) {
			return a, fmt.Errorf("name %s: %s", quoteBounded(n), nameRule)
		}
		a.names[n] = true
	}
	return a, nil
}

// len is the number of tokens.
func (t *tokenSet) len() int {
	if t == nil {
		return 0
	}
	return len(t.hashes)
}

// caller returns the name of the caller whose token r presents, and whether
// one does. Every known token is compared, whatever matched first.
func (t *tokenSet) caller(r *http.Request) (string, bool) {
	c := t.lookup(r)
	if c == nil {
		return "", false
	}
	return c.name, true
}

// lookup returns the caller whose token r presents, nil if none does; on a
// nil *tokenSet, the anonymous caller.
func (t *tokenSet) lookup(r *http.Request) *caller {
	if t == nil {
		return anonymous
	}
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil
	}
	h := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	found := -1
	for i := range t.hashes {
		if subtle.ConstantTimeCompare(h[:], t.hashes[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil
	}
	return t.callers[found]
}
