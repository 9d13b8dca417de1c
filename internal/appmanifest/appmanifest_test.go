package appmanifest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/appmanifest"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/testutil"
)

// conversionAnswer is GitHub's documented answer to the conversion, for the new App.
func conversionAnswer(t *testing.T) map[string]any {
	body := githubtest.Example(t, http.MethodPost, "/app-manifests/{code}/conversions", http.StatusCreated, "")
	body["id"] = 424242
	body["slug"] = "latestwins-acme"
	body["name"] = "latestwins-acme"
	body["html_url"] = "https://github.com/apps/latestwins-acme"
	body["webhook_secret"] = "s3cr3t'with\"quotes"
	body["pem"] = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"
	return body
}

// browser plays the user's browser: it opens the local page and reads the form GitHub would get.
type browser struct {
	t      *testing.T
	page   string
	action *url.URL
	form   appmanifest.Manifest
}

var (
	formAction = regexp.MustCompile(`<form method="post" action="([^"]+)">`)
	formInput  = regexp.MustCompile(`<input type="hidden" name="manifest" value="([^"]+)">`)
)

func openPage(t *testing.T, page string) *browser {
	t.Helper()
	resp, err := http.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", page, resp.StatusCode, b)
	}
	a, m := formAction.FindSubmatch(b), formInput.FindSubmatch(b)
	if a == nil || m == nil {
		t.Fatalf("the page has no form posting a manifest:\n%s", b)
	}
	br := &browser{t: t, page: page}
	if br.action, err = url.Parse(html.UnescapeString(string(a[1]))); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &br.form); err != nil {
		t.Fatalf("the form's manifest is not JSON: %v", err)
	}
	return br
}

// redirect is GitHub sending the browser back to the manifest's redirect URL.
func (b *browser) redirect(code, state string) (int, string) {
	b.t.Helper()
	u := b.form.RedirectURL + "?" + url.Values{"code": {code}, "state": {state}}.Encode()
	resp, err := http.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, html.UnescapeString(string(body))
}

type flowRun struct {
	page chan string
	done chan struct {
		app githubapp.NewApp
		err error
	}
}

func startFlow(ctx context.Context, t *testing.T, gh *githubtest.Server, opts appmanifest.Options) *flowRun {
	t.Helper()
	r := &flowRun{page: make(chan string, 1), done: make(chan struct {
		app githubapp.NewApp
		err error
	}, 1)}
	f := &appmanifest.Flow{
		Options:   opts,
		GitHubURL: "http://127.0.0.1:9", // the browser's destination; never contacted by the test
		Converter: githubapp.New(gh.Client),
		Ready:     func(u string) { r.page <- u },
	}
	go func() {
		a, err := f.Run(ctx)
		r.done <- struct {
			app githubapp.NewApp
			err error
		}{a, err}
	}()
	select {
	case p := <-r.page:
		r.page <- p
	case res := <-r.done:
		t.Fatalf("the flow ended before it served its page: %v", res.err)
	}
	return r
}

func TestFlowRegistersTheApp(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	conv := gh.On(http.MethodPost, "/app-manifests/{code}/conversions", http.StatusCreated, conversionAnswer(t))
	run := startFlow(context.Background(), t, gh, appmanifest.Options{Org: "acme", PublicURL: "https://abc.lambda-url.eu-west-1.on.aws/"})
	page := <-run.page
	if !strings.HasPrefix(page, "http://127.0.0.1:") {
		t.Fatalf("the page is at %s, not on the loopback address", page)
	}
	b := openPage(t, page)

	// The form goes to the organization's new-App page with a state, and carries the manifest.
	state := b.action.Query().Get("state")
	if b.action.Path != "/organizations/acme/settings/apps/new" || len(state) < 32 {
		t.Errorf("the form posts to %s: want the organization's new-App page with a random state", b.action)
	}
	want := appmanifest.Manifest{
		Name: "latestwins", URL: "https://abc.lambda-url.eu-west-1.on.aws",
		Description:    b.form.Description,
		HookAttributes: appmanifest.HookAttributes{URL: "https://abc.lambda-url.eu-west-1.on.aws/webhook", Active: true},
		RedirectURL:    page + "callback",
		DefaultEvents:  []string{"check_run", "deployment_protection_rule", "deployment_status", "issue_comment", "pull_request", "push"},
		DefaultPermissions: map[string]string{"actions": "write", "checks": "read", "contents": "read", "deployments": "write",
			"issues": "write", "members": "read", "metadata": "read", "pull_requests": "write"},
	}
	if d := cmp.Diff(want, b.form); d != "" {
		t.Errorf("the manifest (-want +got):\n%s", d)
	}

	// A redirect that did not come from this flow's form is refused, and nothing is exchanged.
	if status, body := b.redirect("stolen", strings.Repeat("0", 32)); status != http.StatusBadRequest || !strings.Contains(body, appmanifest.ErrStateMismatch.Error()) {
		t.Errorf("a callback with another state answered %d: %s", status, body)
	}
	if status, _ := b.redirect("", state); status != http.StatusBadRequest {
		t.Errorf("a callback without a code answered %d", status)
	}
	if n := len(conv.Requests()); n != 0 {
		t.Fatalf("a refused callback exchanged a code (%d requests)", n)
	}

	status, body := b.redirect("the-code", state)
	if status != http.StatusOK || !strings.Contains(body, "https://github.com/apps/latestwins-acme/installations/new") {
		t.Errorf("the callback answered %d: %s", status, body)
	}
	res := <-run.done
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantApp := githubapp.NewApp{ID: 424242, Slug: "latestwins-acme", Name: "latestwins-acme", Owner: "github",
		HTMLURL: "https://github.com/apps/latestwins-acme", ClientID: "Iv1.8a61f9b3a7aba766", ClientSecret: "1726be1638095a19edd134c77bde3aa2ece1e5d8",
		WebhookSecret: "s3cr3t'with\"quotes", PrivateKey: "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"}
	if d := cmp.Diff(wantApp, res.app); d != "" {
		t.Errorf("the App (-want +got):\n%s", d)
	}
	if reqs := conv.Requests(); len(reqs) != 1 || reqs[0].Path != "/app-manifests/the-code/conversions" {
		t.Errorf("conversion requests %v: want one for the redirect's code", reqs)
	}
}

func TestFlowWithoutPublicURL(t *testing.T) {
	t.Parallel()
	m, err := appmanifest.New(appmanifest.Options{Name: "lw"}, "http://127.0.0.1:5/callback")
	if err != nil {
		t.Fatal(err)
	}
	if m.HookAttributes.Active || m.Name != "lw" {
		t.Errorf("without a public URL the webhook must be inactive: %+v", m)
	}
	u, err := appmanifest.NewAppURL("https://github.com", "", "st")
	if err != nil || u != "https://github.com/settings/apps/new?state=st" {
		t.Errorf("the user's new-App page: %s, %v", u, err)
	}
	for _, bad := range []string{"http://plain.example/", "https://x.example/?q=1", "not a url"} {
		if _, err := appmanifest.New(appmanifest.Options{PublicURL: bad}, "http://127.0.0.1:5/callback"); err == nil {
			t.Errorf("public URL %q accepted", bad)
		}
	}
}

func TestFlowEndsWithItsContext(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	run := startFlow(ctx, t, gh, appmanifest.Options{})
	<-run.page
	cause := errors.New("the user gave up")
	cancel(cause)
	if res := <-run.done; !errors.Is(res.err, cause) {
		t.Errorf("Run returned %v, want the context's cause", res.err)
	}
}

func TestFlowFailsWhenGitHubRefuses(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	gh.On(http.MethodPost, "/app-manifests/{code}/conversions", http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
	run := startFlow(context.Background(), t, gh, appmanifest.Options{})
	b := openPage(t, <-run.page)
	status, body := b.redirect("expired", b.action.Query().Get("state"))
	if status != http.StatusBadGateway || !strings.Contains(body, "Run the command again") {
		t.Errorf("answered %d: %s", status, body)
	}
	if res := <-run.done; res.err == nil {
		t.Error("Run succeeded although GitHub refused the code")
	}
}

func TestFlowListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8080"} {
		f := &appmanifest.Flow{Listen: addr, Converter: githubapp.New(github.NewClient(nil))}
		if _, err := f.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("listen %s: %v, want a refusal", addr, err)
		}
	}
}

func TestWriteCredentials(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.json")
	a := githubapp.NewApp{ID: 7, Slug: "lw", WebhookSecret: "w", PrivateKey: "pem"}
	if err := appmanifest.WriteCredentials(path, a); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}
	var got appmanifest.Credentials
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &got); err != nil || got.AppID != 7 || got.PrivateKey != "pem" || got.WebhookSecret != "w" {
		t.Errorf("file %s: %+v, %v", b, got, err)
	}
	if err := appmanifest.WriteCredentials(path, githubapp.NewApp{ID: 8}); err == nil {
		t.Error("an existing credentials file was replaced")
	}
	if b2, _ := os.ReadFile(path); string(b2) != string(b) {
		t.Error("the existing file changed")
	}
}

// TestSSMCommandsRun runs the printed commands with sh and a fake aws that records its arguments:
// the parameters must receive the secrets byte for byte.
func TestSSMCommandsRun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		testutil.MissingTool(t, "the commands are run with sh, which is not on PATH")
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "aws.log")
	fake := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done >>" + log + "\nprintf 'END\\0' >>" + log + "\n"
	if err := os.WriteFile(filepath.Join(dir, "aws"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	a := githubapp.NewApp{ID: 9, Slug: "lw", WebhookSecret: "it's $HOME `x`", PrivateKey: "-----BEGIN KEY-----\nab'c\n-----END KEY-----\n"}
	var script strings.Builder
	if err := appmanifest.WriteSSMCommands(&script, a, appmanifest.SSMParameters{Region: "eu-west-1"}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-e")
	cmd.Stdin = strings.NewReader(script.String())
	cmd.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "HOME=/nowhere"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the commands do not run: %v\n%s\n%s", err, out, script.String())
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	var call []string
	for _, arg := range strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00") {
		if arg == "END" {
			calls, call = append(calls, call), nil
			continue
		}
		call = append(call, arg)
	}
	want := [][]string{
		{"ssm", "put-parameter", "--region", "eu-west-1", "--overwrite", "--type", "SecureString", "--name", "/latestwins/webhook-secret", "--value=" + a.WebhookSecret},
		{"ssm", "put-parameter", "--region", "eu-west-1", "--overwrite", "--type", "SecureString", "--tier", "Advanced", "--name", "/latestwins/app-private-key", "--value=" + a.PrivateKey},
	}
	if d := cmp.Diff(want, calls); d != "" {
		t.Errorf("aws calls (-want +got):\n%s", d)
	}
}

// needs are the repository permissions (name:access) an operation needs, any one of them; from
// GitHub's REST reference ("Fine-grained access tokens" of each endpoint) and webhook reference.
type needs []string

// clientCalls maps each method of *githubapp.Client to what its request needs. A new method fails
// TestManifestMatchesCode until it is added here.
var clientCalls = map[string]needs{
	"AddReaction":            {"issues:write", "pull_requests:write"},
	"CreateComment":          {"issues:write", "pull_requests:write"},
	"UpsertComment":          {"issues:write", "pull_requests:write"},
	"CreateIssue":            {"issues:write"}, // a convergence alarm's issue
	"CloseIssue":             {"issues:write"},
	"DispatchWorkflow":       {"actions:write"},
	"CancelRun":              {"actions:write"},
	"UpsertCheckRun":         {"checks:write"},
	"FileContent":            {"contents:read"},
	"CompareCommits":         {"contents:read"},
	"Compare":                {"contents:read"},
	"CreateDeployment":       {"deployments:write"},
	"CreateDeploymentStatus": {"deployments:write"},
	"Permission":             {"metadata:read"},
	"ReviewProtectionRule":   {"deployments:write"},
	"TeamMember":             {"members:read"}, // approvers named as teams
	"ConvertManifest":        nil,              // unauthenticated
}

// eventNeeds is what receiving each webhook event needs.
var eventNeeds = map[string]needs{
	"push":                       {"contents:read"},
	"pull_request":               {"pull_requests:read"},
	"issue_comment":              {"issues:read", "pull_requests:read"},
	"check_run":                  {"checks:read"},
	"deployment_protection_rule": {"deployments:read"},
	"deployment_status":          {"deployments:read"},
}

// alwaysSent are events GitHub delivers to every App without a subscription.
var alwaysSent = []string{"installation"}

// appCalls finds the *githubapp.Client methods the App's code calls: every call of a method of
// that name in the non-test files of app/ and lambda/.
func appCalls(t *testing.T) []string {
	t.Helper()
	methods := map[string]bool{}
	typ := reflect.TypeFor[*githubapp.Client]()
	for i := range typ.NumMethod() {
		methods[typ.Method(i).Name] = true
	}
	for m := range methods {
		if _, ok := clientCalls[m]; !ok {
			t.Errorf("githubapp.Client.%s is not in clientCalls: add what its request needs", m)
		}
	}
	found := map[string]bool{}
	fset := token.NewFileSet()
	for _, dir := range []string{"../../app", "../../internal/ghadapter", "../../lambda"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && methods[sel.Sel.Name] {
						found[sel.Sel.Name] = true
					}
				}
				return true
			})
		}
	}
	var out []string
	for m := range found {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// handledEvents asks app.Handle which events it acts on: every event GitHub sends, without a
// payload; an event the App does not use comes back ignored as "not used".
func handledEvents(t *testing.T) []string {
	t.Helper()
	a, err := app.New(app.Options{Secret: []byte("s"), Authority: authority.New(memory.New()), Config: noConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range append(github.MessageTypes(), "deployment_protection_rule") {
		res, err := a.Handle(context.Background(), app.Delivery{ID: "probe", Event: ev})
		if err != nil || res.Outcome != app.OutcomeIgnored || !strings.Contains(res.Message, "not used") {
			out = append(out, ev)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

type noConfig struct{}

func (noConfig) Config(context.Context, int64, app.RepoRef, string) (*config.Config, error) {
	return nil, errors.New("no configuration in this test")
}

// manifestProblems compares the manifest's permissions and events with what the code needs.
func manifestProblems(perms map[string]string, events, calls, handled []string) []string {
	var p []string
	var required []needs
	for _, c := range calls {
		if n := clientCalls[c]; n != nil {
			required = append(required, n)
		}
	}
	var wantEvents []string
	for _, ev := range handled {
		if slices.Contains(alwaysSent, ev) {
			continue
		}
		wantEvents = append(wantEvents, ev)
		n, ok := eventNeeds[ev]
		if !ok {
			p = append(p, fmt.Sprintf("the App handles %s events: add what receiving them needs to eventNeeds", ev))
			continue
		}
		required = append(required, n)
	}
	sorted := slices.Sorted(slices.Values(events))
	if d := cmp.Diff(wantEvents, sorted); d != "" {
		p = append(p, fmt.Sprintf("the manifest's events differ from those app.Handle acts on (-handled +manifest):\n%s", d))
	}
	rank := map[string]int{"read": 1, "write": 2}
	used := map[string]bool{}
	for _, n := range required {
		ok := false
		for _, alt := range n {
			name, access, _ := strings.Cut(alt, ":")
			if rank[perms[name]] >= rank[access] {
				ok = true
			}
			if perms[name] == access {
				used[name] = true
			}
		}
		if !ok {
			p = append(p, fmt.Sprintf("the manifest lacks any of %v, which the App needs", n))
		}
	}
	for name, access := range perms {
		if !used[name] {
			p = append(p, fmt.Sprintf("the manifest asks for %s:%s, which nothing the App does needs at that level", name, access))
		}
	}
	sort.Strings(p)
	return p
}

// TestManifestMatchesCode checks the manifest's permissions against the GitHub calls the App's code
// makes, and its events against those app.Handle acts on: no permission missing, none in excess.
func TestManifestMatchesCode(t *testing.T) {
	t.Parallel()
	calls, handled := appCalls(t), handledEvents(t)
	if !slices.Contains(calls, "DispatchWorkflow") || !slices.Contains(handled, "push") {
		t.Fatalf("the scan found calls %v and events %v: it no longer sees the App's code", calls, handled)
	}
	m, err := appmanifest.New(appmanifest.Options{}, "http://127.0.0.1:5/callback")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range manifestProblems(m.DefaultPermissions, m.DefaultEvents, calls, handled) {
		t.Error(p)
	}

	// Broken manifests the comparison must refuse.
	for name, mutate := range map[string]func(map[string]string, []string) []string{
		"contents write":       func(p map[string]string, e []string) []string { p["contents"] = "write"; return e },
		"no actions":           func(p map[string]string, e []string) []string { delete(p, "actions"); return e },
		"administration write": func(p map[string]string, e []string) []string { p["administration"] = "write"; return e },
		"an extra event":       func(p map[string]string, e []string) []string { return append(e, "issues") },
		"a missing event": func(p map[string]string, e []string) []string {
			return slices.DeleteFunc(e, func(s string) bool { return s == "check_run" })
		},
	} {
		perms := map[string]string{}
		for k, v := range m.DefaultPermissions {
			perms[k] = v
		}
		events := mutate(perms, slices.Clone(m.DefaultEvents))
		if len(manifestProblems(perms, events, calls, handled)) == 0 {
			t.Errorf("the comparison accepts a manifest with %s", name)
		}
	}
}
