package app

import (
	"encoding/json"
	"net/http"
)

// MetaPath is where the App says what a client needs to know to use it (GET, no authentication).
const MetaPath = "/meta"

// Meta is the answer of GET /meta: what the App expects of its clients, so that a client (latestwins
// doctor) can compare it with what it would send. Nothing in it is secret.
type Meta struct {
	// OIDC is what the /v1 API requires of a workflow's OIDC token; nil when its verifier does not say.
	OIDC *MetaOIDC `json:"oidc,omitempty"`
}

// MetaOIDC names the issuer and the audience the /v1 API requires in tokens.
type MetaOIDC struct {
	Issuer   string `json:"issuer"`
	Audience string `json:"audience"`
}

// routeMeta serves GET /meta, telling what tokens says it requires.
func routeMeta(mux *http.ServeMux, tokens TokenVerifier) {
	var m Meta
	if v, ok := tokens.(interface {
		Issuer() string
		Audience() string
	}); ok {
		m.OIDC = &MetaOIDC{Issuer: v.Issuer(), Audience: v.Audience()}
	}
	body, _ := json.Marshal(m) // plain strings: cannot fail
	mux.HandleFunc("GET "+MetaPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(body, '\n'))
	})
}
