package appmanifest

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/latestwins/latestwins/internal/githubapp"
)

// Converter exchanges the code of GitHub's redirect for the new App; *githubapp.Client is one.
type Converter interface {
	ConvertManifest(ctx context.Context, code string) (githubapp.NewApp, error)
}

var _ Converter = (*githubapp.Client)(nil)

// ErrStateMismatch is a callback whose state is not the one this flow sent: a request that did not
// come from this flow's form, which is refused.
var ErrStateMismatch = errors.New("the callback's state is not this flow's")

// Flow is one run of the manifest flow.
type Flow struct {
	Options Options
	// GitHubURL is GitHub's web address; default https://github.com.
	GitHubURL string
	// Converter exchanges the code; required.
	Converter Converter
	// Listen is the local page's address; it must be on the loopback interface. Default 127.0.0.1:0.
	Listen string
	// Ready is told the local page's URL once it listens, for the user to open.
	Ready func(pageURL string)
	// Random is the source of the state value; default crypto/rand.
	Random io.Reader
}

// Run serves the local page until GitHub's redirect brings a code and the code is exchanged for the
// App, or until ctx ends. A callback with another state is refused (400) and the flow keeps waiting.
func (f *Flow) Run(ctx context.Context) (githubapp.NewApp, error) {
	if f.Converter == nil {
		return githubapp.NewApp{}, errors.New("app manifest flow: no Converter")
	}
	listen := f.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	if err := requireLoopback(listen); err != nil {
		return githubapp.NewApp{}, err
	}
	random := f.Random
	if random == nil {
		random = rand.Reader
	}
	raw := make([]byte, 16)
	if _, err := io.ReadFull(random, raw); err != nil {
		return githubapp.NewApp{}, fmt.Errorf("app manifest flow: make the state: %w", err)
	}
	state := hex.EncodeToString(raw)

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return githubapp.NewApp{}, fmt.Errorf("app manifest flow: listen on %s: %w", listen, err)
	}
	page := "http://" + ln.Addr().String() + "/"
	manifest, err := New(f.Options, page+"callback")
	if err != nil {
		ln.Close()
		return githubapp.NewApp{}, err
	}
	githubURL := f.GitHubURL
	if githubURL == "" {
		githubURL = "https://github.com"
	}
	action, err := NewAppURL(githubURL, f.Options.Org, state)
	if err != nil {
		ln.Close()
		return githubapp.NewApp{}, err
	}
	h := &handler{manifest: manifest, action: action, state: state, convert: f.Converter, done: make(chan result, 1)}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		<-served
	}()
	if f.Ready != nil {
		f.Ready(page)
	}
	select {
	case r := <-h.done:
		return r.app, r.err
	case <-ctx.Done():
		return githubapp.NewApp{}, fmt.Errorf("app manifest flow: no App registered: %w", context.Cause(ctx))
	case err := <-served:
		return githubapp.NewApp{}, fmt.Errorf("app manifest flow: the local page stopped: %w", err)
	}
}

func requireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("app manifest flow: listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("app manifest flow: listen address %q: the page hands out the App's credentials, so it listens on a loopback address only (127.0.0.1)", addr)
	}
	return nil
}

type result struct {
	app githubapp.NewApp
	err error
}

type handler struct {
	manifest Manifest
	action   string
	state    string
	convert  Converter
	done     chan result

	mu       sync.Mutex
	finished bool
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Register {{.Name}} on GitHub</title></head>
<body>
<h1>Register the {{.Name}} GitHub App</h1>
<p>This sends the App's manifest to GitHub: its permissions, its events and its webhook. GitHub asks you
to confirm, then comes back here, and the command line receives the App's id, private key and webhook
secret.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<button type="submit">Create the App on GitHub</button>
</form>
<script>document.forms[0].submit();</script>
</body></html>
`))

var donePage = template.Must(template.New("done").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body><h1>{{.Title}}</h1><p>{{.Text}}</p>{{if .Link}}<p><a href="{{.Link}}">{{.Link}}</a></p>{{end}}</body></html>
`))

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/":
		h.servePage(w)
	case r.Method == http.MethodGet && r.URL.Path == "/callback":
		h.serveCallback(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (h *handler) servePage(w http.ResponseWriter) {
	body, err := json.Marshal(h.manifest)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = pageTmpl.Execute(w, map[string]string{"Name": h.manifest.Name, "Action": h.action, "Manifest": string(body)})
}

func (h *handler) serveCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(h.state)) != 1 {
		h.answer(w, http.StatusBadRequest, "Refused", ErrStateMismatch.Error()+": open the page the command line printed, and start from there.", "")
		return
	}
	code := q.Get("code")
	if code == "" {
		h.answer(w, http.StatusBadRequest, "Refused", "GitHub's redirect carries no code.", "")
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.finished {
		h.answer(w, http.StatusGone, "Already done", "This flow has ended; the command line has the result.", "")
		return
	}
	h.finished = true
	app, err := h.convert.ConvertManifest(r.Context(), code)
	if err != nil {
		h.done <- result{err: fmt.Errorf("app manifest flow: %w", err)}
		h.answer(w, http.StatusBadGateway, "GitHub did not hand over the App", err.Error()+" Run the command again: a code works once, for an hour.", "")
		return
	}
	h.done <- result{app: app}
	h.answer(w, http.StatusOK, "Registered "+app.Name,
		"The command line has the App's credentials. Install the App on the repositories it deploys for:", app.HTMLURL+"/installations/new")
}

func (h *handler) answer(w http.ResponseWriter, status int, title, text, link string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = donePage.Execute(w, map[string]string{"Title": title, "Text": text, "Link": link})
}
