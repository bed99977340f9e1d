package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/idforge/idforge/engine"
)

// Tokens are the bearer tokens callers may present, one per caller. The
// server compares hashes of the presented token with every known token in
// constant time, so neither a token nor its length leaks through timing.
// A nil *Tokens admits every request.
type Tokens struct {
	callers []string
	hashes  [][sha256.Size]byte
}

// ReadTokens reads a tokens file: one caller a line, "name token" (separated
// by white space) or a bare token (named after its line number); blank lines
// and lines starting with # are skipped. Tokens shorter than 16 bytes are
// refused. An empty file is an error: it would lock every caller out. Every
// error wraps engine.ErrInvalidConfig.
func ReadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: tokens file: %v", engine.ErrInvalidConfig, err)
	}
	defer f.Close()
	return ParseTokens(f)
}

// ParseTokens reads tokens in the format of [ReadTokens].
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		var name, tok string
		switch len(fields) {
		case 1:
			name, tok = fmt.Sprintf("line-%d", n), fields[0]
		case 2:
			name, tok = fields[0], fields[1]
		default:
			return nil, fmt.Errorf("%w: tokens line %d: want \"name token\" or a bare token", engine.ErrInvalidConfig, n)
		}
		if len(tok) < 16 {
			return nil, fmt.Errorf("%w: tokens line %d: a token needs at least 16 characters", engine.ErrInvalidConfig, n)
		}
		t.callers = append(t.callers, name)
		t.hashes = append(t.hashes, sha256.Sum256([]byte(tok)))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: tokens: %v", engine.ErrInvalidConfig, err)
	}
	if len(t.hashes) == 0 {
		return nil, fmt.Errorf("%w: tokens: no token found", engine.ErrInvalidConfig)
	}
	return t, nil
}

// Len is the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.hashes)
}

// Caller returns the name of the caller whose token r presents, and whether
// one does. Every known token is compared, whatever matched first.
func (t *Tokens) Caller(r *http.Request) (string, bool) {
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	h := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	found := -1
	for i := range t.hashes {
		if subtle.ConstantTimeCompare(h[:], t.hashes[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return t.callers[found], true
}

func (t *Tokens) allow(r *http.Request) bool {
	if t == nil {
		return true
	}
	_, ok := t.Caller(r)
	return ok
}
