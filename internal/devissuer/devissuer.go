// Package devissuer is a token issuer for trying the App's /v1 API on one machine: it stands in for
// GitHub Actions' OIDC issuer, on 127.0.0.1 only, with a key made when it starts. `latestwins serve
// --dev-tokens` runs one and trusts it; it refuses to on any address but loopback.
package devissuer

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// TokenTTL is how long an issued token is valid.
const TokenTTL = 10 * time.Minute

var repoRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// Issuer serves OIDC discovery, its key set and tokens on a loopback port of its own.
type Issuer struct {
	// URL is the issuer, http://127.0.0.1:PORT: the iss of its tokens and the base of discovery.
	URL      string
	audience string
	key      *rsa.PrivateKey
	kid      string
	srv      *http.Server
	done     chan struct{}
}

// Start makes a key and serves on a free port of 127.0.0.1 until Close.
func Start(audience string) (*Issuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("development issuer: make a key: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("development issuer: listen on loopback: %w", err)
	}
	i := &Issuer{URL: "http://" + ln.Addr().String(), audience: audience, key: key, kid: "dev-1", done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"issuer": i.URL, "jwks_uri": i.URL + "/.well-known/jwks",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /.well-known/jwks", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": i.kid, "use": "sig", "alg": "RS256",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	})
	mux.HandleFunc("GET /token", i.token)
	i.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { defer close(i.done); _ = i.srv.Serve(ln) }()
	return i, nil
}

// Close stops serving.
func (i *Issuer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := i.srv.Shutdown(ctx)
	<-i.done
	return err
}

// token answers GET /token?repository=OWNER/NAME[&run_id=N&run_attempt=N&actor=LOGIN&ref=REF] with
// a signed token of that workflow run, as GitHub Actions would issue it.
func (i *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if ip := net.ParseIP(hostOf(r.RemoteAddr)); ip == nil || !ip.IsLoopback() {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "development tokens are given on this machine only"})
		return
	}
	q := r.URL.Query()
	repo := q.Get("repository")
	if !repoRE.MatchString(repo) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "give ?repository=OWNER/NAME, the repository the token acts for"})
		return
	}
	now := time.Now()
	claims := jwt.MapClaims{"iss": i.URL, "aud": i.audience, "sub": "repo:" + repo + ":ref:" + or(q.Get("ref"), "refs/heads/main"),
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(TokenTTL).Unix(),
		"repository": repo, "actor": or(q.Get("actor"), "developer"), "ref": or(q.Get("ref"), "refs/heads/main"),
		"run_id": or(q.Get("run_id"), "1"), "run_attempt": or(q.Get("run_attempt"), "1")}
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	t.Header["kid"] = i.kid
	s, err := t.SignedString(i.key)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = fmt.Fprintln(w, s)
}

// Loopback reports whether addr (host:port, or :port) listens on loopback only.
func Loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errors.New("development tokens are accepted only by a server that listens on loopback (127.0.0.1 or ::1): anyone who reaches this address could otherwise act as any repository")
}

func hostOf(remote string) string {
	h, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return h
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
