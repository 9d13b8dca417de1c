//go:build unix

// Package browsertest loads the App's status page in a real browser, headless Chromium, and checks
// what it renders from real state in a bolt store. The browser is Debian's chromium package (or
// the binary LATESTWINS_TEST_CHROMIUM names); without one the tests fail under CI=true and are
// skipped with instructions elsewhere.
package browsertest

import (
	"bytes"
	"context"
	"errors"
	"html"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

const (
	apiSha = "6113728f27ae82c7b1a177c8d03f9e96e0adf246" // deployed to staging/api at generation 1
	webSha = "a10867b14bb761a232cd80139fbd4c0d33264240" // accepted for staging/web at generation 2, deploying
)

// start is the store clock's first reading; the page shows times in UTC.
var start = time.Date(2026, 3, 14, 9, 26, 0, 0, time.UTC)

// noConfig is a ConfigSource for an App that only serves its status page.
type noConfig struct{}

func (noConfig) Config(context.Context, int64, app.RepoRef, string) (*config.Config, error) {
	return nil, errors.New("no configuration: the status page needs none")
}

var _ app.ConfigSource = noConfig{}

// server is the App on a bolt store in a temporary directory, served on loopback, with state:
// staging/api deployed at generation 1; staging/web accepted at generation 2, claimed, and in its
// deploy under a lease held by run-2 with 1m30s left. "/probe" is a page whose script changes its
// DOM, to show that the browser's scripts really are off when a check says so.
func server(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "latestwins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	clock := storetest.NewClock(start)
	auth := authority.New(store, authority.WithClock(clock))

	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// staging/api: accepted and claimed, deployed under a lease, completed.
	acc, err := auth.Accept(ctx, authority.Intent{ID: "run-1", Environment: "staging", Scopes: []string{"api"}, Sha: apiSha,
		Ref: "refs/heads/main", Source: "push", Actor: "octocat"}, true)
	must("accept api", err)
	clock.Advance(20 * time.Second)
	g, err := auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: acc.Generation, Scopes: []string{"api"},
		Phase: "deploy", Holder: "run-1", LeaseTTL: 2 * time.Minute})
	must("gate api", err)
	clock.Advance(40 * time.Second)
	_, err = auth.Complete(ctx, authority.Completion{Environment: "staging", Generation: acc.Generation, Scopes: []string{"api"},
		Holder: "run-1", Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Run: "run-1"})
	must("complete api", err)

	// staging/web: accepted and claimed at generation 2, in its deploy under a held lease.
	clock.Advance(time.Minute)
	acc, err = auth.Accept(ctx, authority.Intent{ID: "run-2", Environment: "staging", Scopes: []string{"web"}, Sha: webSha,
		Ref: "refs/heads/main", Source: "push", Actor: "hubot"}, true)
	must("accept web", err)
	clock.Advance(10 * time.Second)
	_, err = auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: acc.Generation, Scopes: []string{"web"},
		Phase: "deploy", Holder: "run-2", LeaseTTL: 2 * time.Minute})
	must("gate web", err)
	clock.Advance(30 * time.Second)

	a, err := app.New(app.Options{Secret: []byte("status page test"), Authority: auth, Config: noConfig{}, StatusPage: app.StatusPageOpen,
		Environments: func(context.Context) ([]string, error) { return []string{"prod", "staging"}, nil }})
	must("app.New", err)
	mux := http.NewServeMux()
	mux.Handle("/", a)
	mux.HandleFunc("GET /probe", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><html><head><title>probe</title></head><body><p id="p">static</p>`+
			`<script>document.getElementById("p").textContent = "scripted";</script></body></html>`)
	})
	srv := httptest.NewServer(mux) // on 127.0.0.1
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestStatusPageInChromium(t *testing.T) {
	bin := chromiumPath(t)
	url := server(t)
	page := get(t, url+"/")
	withJS, took := dumpDOM(t, bin, url+"/")
	t.Logf("chromium --dump-dom: %s", took)

	t.Run("content", func(t *testing.T) {
		checkContent(t, withJS)
	})

	t.Run("no script", func(t *testing.T) {
		if n := strings.Count(strings.ToLower(page), "<script"); n != 0 {
			t.Errorf("the status page as served has %d <script> elements, want none: it must work without JavaScript", n)
		}
		doms, took := scriptlessDOMs(t, bin, url+"/probe", url+"/")
		t.Logf("chromium without scripts, over the DevTools pipe (2 pages): %s", took)
		probe, withoutJS := doms[0], doms[1]
		// The probe's script would have replaced "static": scripts were off for this load.
		if !strings.Contains(probe, `<p id="p">static</p>`) {
			t.Fatalf("the probe page ran its script, so the check below would prove nothing; its DOM:\n%s", probe)
		}
		if strings.Contains(strings.ToLower(withJS), "<script") {
			t.Errorf("the rendered DOM has a <script> element:\n%s", withJS)
		}
		// --dump-dom serializes the document (doctype first), the protocol the <html> element.
		doctype, withJSRoot, ok := strings.Cut(withJS, "\n<html")
		if doctype != "<!DOCTYPE html>" || !ok {
			t.Errorf("the rendered document does not start with <!DOCTYPE html> (standards mode):\n%s", withJS)
		}
		if diff := cmp.Diff(strings.TrimSpace("<html"+withJSRoot), strings.TrimSpace(withoutJS)); diff != "" {
			t.Errorf("the DOM differs with scripts on and off (-on +off):\n%s", diff)
		}
		checkContent(t, withoutJS)
	})

	t.Run("screenshot", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "status.png")
		took := screenshot(t, bin, url+"/", path)
		t.Logf("chromium --screenshot: %s", took)
		checkPNG(t, path)
	})
}

// get fetches a page as served, before any browser parses it.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}

// checkContent checks the rendered status page against the state server put in the store.
func checkContent(t *testing.T, dom string) {
	t.Helper()
	if got, want := text(between(t, dom, "<title>", "</title>")), "latestwins status"; got != want {
		t.Errorf("title %q, want %q", got, want)
	}
	if !strings.Contains(text(dom), "Read-only status, from the store at 2026-03-14 09:28:40 UTC.") {
		t.Errorf("the page does not say when it read the store (2026-03-14 09:28:40 UTC):\n%s", text(dom))
	}

	prod := section(t, dom, "prod")
	if got, want := text(prod), "prod Nothing accepted yet."; got != want {
		t.Errorf("prod section %q, want %q", got, want)
	}

	staging := section(t, dom, "staging")
	if got, want := text(between(t, staging, "<h2>", "</h2>")), "staging"; got != want {
		t.Errorf("environment heading %q, want %q", got, want)
	}
	if got, want := text(between(t, staging, "<p>Observed/desired:", "</p>")), "1/2 reconciling"; got != want {
		t.Errorf("observed/desired %q, want %q", got, want)
	}
	tables := regexp.MustCompile(`(?s)<table>.*?</table>`).FindAllString(staging, -1)
	if len(tables) != 2 {
		t.Fatalf("staging has %d tables, want 2 (scopes, timeline):\n%s", len(tables), staging)
	}
	wantScopes := [][]string{
		{"scope", "live sha", "generation", "deployed", "pending", "owner", "lease"},
		{"api", "6113728", "1", "1m40s ago", "-", "1", "free"},
		{"web", "-", "-", "-", "a10867b (generation 2)", "2", "held by run-2 for deploy, token 1, 1m30s left"},
	}
	if diff := cmp.Diff(wantScopes, rows(tables[0])); diff != "" {
		t.Errorf("scope table (-want +got):\n%s", diff)
	}
	// The short sha carries the full one, and the held lease is marked.
	if !strings.Contains(tables[0], `<code title="`+apiSha+`">6113728</code>`) {
		t.Errorf("api's live sha is not shown as <code title=FULL>SHORT</code>:\n%s", tables[0])
	}
	if !regexp.MustCompile(`<td class="held">held by run-2`).MatchString(tables[0]) {
		t.Errorf("web's held lease is not marked class=held:\n%s", tables[0])
	}
	wantEvents := [][]string{
		{"time", "event", "scope", "generation", "message"},
		{"2026-03-14 09:28:10", "leased", "web", "2", "Pass 2 entered deploy with token 1"},
		{"2026-03-14 09:28:00", "claimed", "web", "2", "Pass 2 claimed web (a10867b)"},
		{"2026-03-14 09:28:00", "accepted", "web", "2", "Accepted a10867b from push by hubot"},
		{"2026-03-14 09:27:00", "deployed", "api", "1", "Deployed 6113728 (generation 1)"},
		{"2026-03-14 09:26:20", "leased", "api", "1", "Pass 1 entered deploy with token 1"},
		{"2026-03-14 09:26:00", "claimed", "api", "1", "Pass 1 claimed api (6113728)"},
		{"2026-03-14 09:26:00", "accepted", "api", "1", "Accepted 6113728 from push by octocat"},
	}
	if diff := cmp.Diff(wantEvents, rows(tables[1])); diff != "" {
		t.Errorf("timeline, newest first (-want +got):\n%s", diff)
	}
}

// section returns the <section> of one environment.
func section(t *testing.T, dom, env string) string {
	t.Helper()
	return between(t, dom, `<section id="env-`+env+`">`, "</section>")
}

// between returns what lies between the first from and the next to.
func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, after, ok := strings.Cut(s, from)
	if !ok {
		t.Fatalf("the page has no %s:\n%s", from, s)
	}
	in, _, ok := strings.Cut(after, to)
	if !ok {
		t.Fatalf("the page has %s but no %s after it:\n%s", from, to, s)
	}
	return in
}

var (
	rowRE  = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)
	cellRE = regexp.MustCompile(`(?s)<t[hd][^>]*>(.*?)</t[hd]>`)
	tagRE  = regexp.MustCompile(`<[^>]*>`)
	wsRE   = regexp.MustCompile(`\s+`)
)

// rows returns the text of each cell of each row of a table.
func rows(table string) [][]string {
	var out [][]string
	for _, r := range rowRE.FindAllStringSubmatch(table, -1) {
		var cells []string
		for _, c := range cellRE.FindAllStringSubmatch(r[1], -1) {
			cells = append(cells, text(c[1]))
		}
		out = append(out, cells)
	}
	return out
}

// text is the visible text of an HTML fragment, its white space collapsed.
func text(fragment string) string {
	fragment = regexp.MustCompile(`(?s)<(style|head)[^>]*>.*?</(style|head)>`).ReplaceAllString(fragment, " ")
	return strings.TrimSpace(wsRE.ReplaceAllString(html.UnescapeString(tagRE.ReplaceAllString(fragment, " ")), " "))
}

// checkPNG checks that path holds a PNG of the browser window with the page drawn on it: not a
// blank or tiny image.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG: it starts %q", path, b[:min(len(b), 8)])
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode the screenshot: %v", err)
	}
	if got := img.Bounds().Size(); got != (image.Point{windowW, windowH}) {
		t.Errorf("screenshot is %v, want the window size %dx%d", got, windowW, windowH)
	}
	inked, colors := ink(img)
	t.Logf("screenshot: %d bytes, %v, %.1f%% of pixels not white, %d colours", len(b), img.Bounds().Size(), 100*inked, colors)
	if len(b) < 10<<10 {
		t.Errorf("screenshot is only %d bytes: a rendered status page is more than 10 KiB", len(b))
	}
	// Text and table rules on white: some ink, far from all, in more than a handful of shades
	// (anti-aliased text, the coloured lease and status).
	if inked < 0.01 || inked > 0.5 {
		t.Errorf("%.2f%% of the screenshot is not white: want 1%% to 50%%, as a page of text is", 100*inked)
	}
	if colors < 16 {
		t.Errorf("the screenshot has %d colours, want at least 16 (anti-aliased text)", colors)
	}
}

// ink returns the share of pixels that are not white, and how many distinct colours there are.
func ink(img image.Image) (float64, int) {
	bounds := img.Bounds()
	seen := map[color.RGBA]bool{}
	var notWhite int
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			seen[c] = true
			if c.R < 250 || c.G < 250 || c.B < 250 {
				notWhite++
			}
		}
	}
	return float64(notWhite) / float64(bounds.Dx()*bounds.Dy()), len(seen)
}
