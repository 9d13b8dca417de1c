//go:build unix

package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/app/internal/api"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/storetest"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

const reportConfig = `environments:
  staging:
    scopes:
      api:
        repository: acme/api
        branch: main
        workflow: deploy.yml
      web:
        repository: acme/web
        branch: main
        workflow: web.yml
`

// reportWorld is the App with an open status page and its API, on a bolt store whose staging has
// three days of deploys: api deploys every day (twice on the second, the first of them carrying
// two pushes), web fails terminally on the second day and is restored on the third.
func reportWorld(t *testing.T) (appURL string, token string) {
	t.Helper()
	ctx := t.Context()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "latestwins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	clock := storetest.NewClock(start)
	auth := authority.New(store, authority.WithClock(clock))
	n := 0
	pass := func(scope string, outcome authority.Outcome, pushes int, wait time.Duration) {
		t.Helper()
		var gen int64
		for range pushes {
			n++
			acc, err := auth.Accept(ctx, authority.Intent{ID: fmt.Sprintf("run-%d", n), Environment: "staging", Scopes: []string{scope},
				Sha: fmt.Sprintf("%040x", 0xabc000+n), Ref: "refs/heads/main", Source: "push", Actor: "octocat",
				Order: authority.Order{CommittedAt: clock.Now().Add(-time.Hour)}}, false)
			if err != nil {
				t.Fatal(err)
			}
			gen = acc.Generation
			clock.Advance(time.Minute)
		}
		if _, err := auth.Claim(ctx, "staging", gen, []string{scope}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(wait)
		g, err := auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: gen, Scopes: []string{scope}, Phase: "deploy", Holder: "runner", LeaseTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := auth.Complete(ctx, authority.Completion{Environment: "staging", Generation: gen, Scopes: []string{scope}, Holder: "runner",
			Tokens: g.Tokens, Outcome: outcome, Attempt: 1, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	pass("api", authority.OutcomeSuccess, 1, 10*time.Minute)
	clock.Advance(24 * time.Hour)
	pass("api", authority.OutcomeSuccess, 2, 20*time.Minute)
	pass("api", authority.OutcomeSuccess, 1, 5*time.Minute)
	pass("web", authority.OutcomeFailure, 1, 3*time.Minute)
	clock.Advance(24 * time.Hour)
	pass("web", authority.OutcomeSuccess, 1, 30*time.Minute)
	pass("api", authority.OutcomeSuccess, 1, 40*time.Minute)
	clock.Advance(time.Hour)

	cfg := filepath.Join(t.TempDir(), "latestwins.yml")
	if err := os.WriteFile(cfg, []byte(reportConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	iss := oidctest.NewIssuer(t)
	tokens, err := api.NewOIDCVerifier(api.OIDCOptions{Issuer: iss.URL, Clock: auth})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(app.Options{Secret: []byte("report page test"), Authority: auth, Config: &app.FileConfig{Path: cfg}, StatusPage: app.StatusPageOpen,
		Tokens: tokens, Environments: func(context.Context) ([]string, error) { return []string{"staging"}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a) // on 127.0.0.1
	t.Cleanup(srv.Close)
	return srv.URL, iss.Sign(t, iss.Claims("acme/web", "latestwins", clock.Now()))
}

// The report page draws its charts as SVG in the browser, without script, and its numbers are the
// API's: every figure cell and every bar's value.
func TestReportPageInChromium(t *testing.T) {
	bin := chromiumPath(t)
	appURL, token := reportWorld(t)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, appURL+"/v1/environments/staging/report?since=7d", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var want report.Delivery
	err = json.NewDecoder(resp.Body).Decode(&want)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET .../report: %d, %v", resp.StatusCode, err)
	}
	// api: 4 deploys of 5 commits; web: 1 deploy that carries its failed commit too.
	if want.Total.Deploys != 5 || want.Total.Failures != 1 || want.Total.Commits != 7 || len(want.Scopes) != 2 || want.Total.Restore.Count != 1 {
		t.Fatalf("the API's report: %+v; want 5 deploys of 7 commits, 1 failure restored, over api and web", want.Total)
	}

	// What the browser lays out: each chart's size, and per bar its value and drawn height; each
	// figure cell's value.
	const measure = `JSON.stringify({
		charts: [...document.querySelectorAll("svg.chart")].map(s => ({id: s.id, w: s.getBoundingClientRect().width, h: s.getBoundingClientRect().height,
			bars: [...s.querySelectorAll("rect.bar")].map(r => ({date: r.dataset.date, value: r.dataset.value, h: r.getBoundingClientRect().height, fill: getComputedStyle(r).fill}))})),
		cells: Object.fromEntries([...document.querySelectorAll("td[id]")].map(td => [td.id, td.dataset.value])),
		scripts: document.scripts.length})`
	var got struct {
		Charts []struct {
			ID   string
			W, H float64
			Bars []struct {
				Date, Value, Fill string
				H                 float64
			}
		}
		Cells   map[string]string
		Scripts int
	}
	drive(t, bin, func(b *browser) error {
		if err := b.open(appURL + "/"); err != nil {
			return err
		}
		if err := b.click("report-staging"); err != nil {
			return err
		}
		if err := b.open(appURL + "/report/staging?since=7d"); err != nil {
			return err
		}
		s, err := b.eval(measure)
		if err != nil {
			return err
		}
		return json.Unmarshal([]byte(s), &got)
	})
	if got.Scripts != 0 {
		t.Errorf("the report page has %d scripts; it needs none", got.Scripts)
	}

	secs := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Errorf("a value %q is not a number", s)
		}
		return v
	}
	sections := append([]report.Figures{want.Total}, want.Scopes...)
	for _, f := range sections {
		id := "total"
		if f.Scope != "" {
			id = "scope-" + f.Scope
		}
		for cell, v := range map[string]float64{"deploys": float64(f.Deploys), "lead-p50": f.LeadFromAccept.P50Seconds, "lead-p90": f.LeadFromAccept.P90Seconds,
			"cfr": f.ChangeFailureRate, "behind": f.BehindSeconds} {
			if g := secs(got.Cells[id+"-"+cell]); g != v {
				t.Errorf("%s-%s on the page is %v; the API says %v", id, cell, g, v)
			}
		}
		daily := map[string]func(report.DayFigures) float64{
			"deploys":  func(d report.DayFigures) float64 { return float64(d.Deploys) },
			"lead":     func(d report.DayFigures) float64 { return d.LeadP50 },
			"failures": func(d report.DayFigures) float64 { return float64(d.Failures + d.Rollbacks) },
			"behind":   func(d report.DayFigures) float64 { return d.BehindSeconds },
		}
		for name, value := range daily {
			chartID := "chart-" + id + "-" + name
			found := false
			for _, c := range got.Charts {
				if c.ID != chartID {
					continue
				}
				found = true
				if c.W < 100 || c.H < 50 {
					t.Errorf("%s is laid out %vx%v: not drawn", chartID, c.W, c.H)
				}
				if len(c.Bars) != len(f.Daily) {
					t.Fatalf("%s has %d bars for %d days", chartID, len(c.Bars), len(f.Daily))
				}
				for i, bar := range c.Bars {
					d := f.Daily[i]
					if bar.Date != d.Date || secs(bar.Value) != value(d) {
						t.Errorf("%s's bar %d is %s %s; the API says %s %v", chartID, i, bar.Date, bar.Value, d.Date, value(d))
					}
					if drawn := bar.H > 0; drawn != (value(d) > 0) {
						t.Errorf("%s's bar of %s (value %v) is drawn %vpx high", chartID, d.Date, value(d), bar.H)
					}
					if bar.Fill != "rgb(9, 105, 218)" {
						t.Errorf("%s's bar is filled %q, not the bars' blue", chartID, bar.Fill)
					}
				}
			}
			if !found {
				t.Errorf("no chart %s on the page", chartID)
			}
		}
	}

	// And the pixels: the bars' blue is on the screen.
	shot := filepath.Join(t.TempDir(), "report.png")
	screenshot(t, bin, appURL+"/report/staging?since=7d", shot)
	blue := bluePixels(t, shot)
	t.Logf("screenshot: %d pixels of the bars' blue", blue)
	if blue < 200 {
		t.Errorf("the screenshot has %d pixels of the bars' blue: the charts are not drawn", blue)
	}

	dom, _ := dumpDOM(t, bin, appURL+"/report/prod")
	if !strings.Contains(dom, "no environment \"prod\" to report on here") {
		t.Errorf("the report of an environment the page does not show:\n%s", dom)
	}
}

func bluePixels(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if c.R == 9 && c.G == 105 && c.B == 218 {
				n++
			}
		}
	}
	return n
}
