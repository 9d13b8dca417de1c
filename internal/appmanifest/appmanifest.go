// Package appmanifest registers the latestwins GitHub App in one click, with GitHub's App manifest
// flow (https://docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest):
//
//  1. a page served on 127.0.0.1 posts the manifest (the permissions and events the App uses, its
//     webhook URL, and this page's callback as the redirect) to GitHub's "new App" form;
//  2. the user confirms on GitHub, which redirects the browser to the callback with a one-time code;
//  3. the callback exchanges the code for the App's id, private key and webhook secret
//     (POST /app-manifests/{code}/conversions).
//
// The command line's `latestwins app create` runs it and writes the credentials to a file only its
// owner can read, or prints the commands that put them in SSM Parameter Store.
package appmanifest

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Manifest is GitHub's App manifest, as the "new App" form takes it.
type Manifest struct {
	Name               string            `json:"name"`
	URL                string            `json:"url"`
	Description        string            `json:"description"`
	HookAttributes     HookAttributes    `json:"hook_attributes"`
	RedirectURL        string            `json:"redirect_url"`
	Public             bool              `json:"public"`
	DefaultEvents      []string          `json:"default_events"`
	DefaultPermissions map[string]string `json:"default_permissions"`
}

// HookAttributes is the App's webhook.
type HookAttributes struct {
	URL    string `json:"url"`
	Active bool   `json:"active"`
}

// Permissions are the repository permissions the App asks for, and why. They follow from the calls
// the App makes as an installation and from the events it subscribes to; TestManifestMatchesCode
// derives them from the code and compares.
var Permissions = map[string]string{
	"metadata":      "read",  // every repository permission implies it; a commenter's permission (/latestwins unlock)
	"contents":      "read",  // .github/latestwins.yml at a commit; push events
	"actions":       "write", // workflow_dispatch of the configured workflows
	"issues":        "write", // replies and reactions to comment commands; issue_comment events; convergence alarm issues
	"pull_requests": "write", // the same on pull requests; pull_request events (previews)
	"checks":        "read",  // check_run events (a re-run of a latestwins check run redeploys)
	"deployments":   "write", // deployment protection rule answers; deployment_protection_rule events
	"members":       "read",  // an organization's team membership, for approvers named as teams (approvals:)
}

// Events are the webhook events the App subscribes to: those app.Handle acts on, except installation,
// which GitHub sends to every App.
var Events = []string{"check_run", "deployment_protection_rule", "deployment_status", "issue_comment", "pull_request", "push"}

// Options describe the App to register.
type Options struct {
	// Name is the App's name on GitHub; it must be unique there. Default latestwins.
	Name string
	// PublicURL is where the App will be reachable (the Lambda Function URL, or serve's address);
	// the webhook is PublicURL/webhook. Empty registers the webhook inactive, to be set later.
	PublicURL string
	// Org registers the App under an organization rather than the user's account.
	Org string
	// Public lets other accounts install the App (default: only its owner).
	Public bool
}

// homepage is the App's URL when no public URL is given.
const homepage = "https://github.com/latestwins/latestwins"

// New returns the manifest for opts, with redirectURL as where GitHub sends the browser back.
func New(opts Options, redirectURL string) (Manifest, error) {
	name := opts.Name
	if name == "" {
		name = "latestwins"
	}
	m := Manifest{
		Name:               name,
		URL:                homepage,
		Description:        "Latest-wins coordination for deployments: generations, a mailbox per scope, fenced leases.",
		RedirectURL:        redirectURL,
		Public:             opts.Public,
		DefaultEvents:      append([]string(nil), Events...),
		DefaultPermissions: map[string]string{},
	}
	for k, v := range Permissions {
		m.DefaultPermissions[k] = v
	}
	if opts.PublicURL != "" {
		u, err := url.Parse(opts.PublicURL)
		if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return Manifest{}, fmt.Errorf("public URL %q: want the App's base URL, such as https://ID.lambda-url.REGION.on.aws/", opts.PublicURL)
		}
		if u.Scheme != "https" {
			return Manifest{}, fmt.Errorf("public URL %q: GitHub delivers webhooks over https only", opts.PublicURL)
		}
		m.URL = strings.TrimSuffix(u.String(), "/")
		m.HookAttributes = HookAttributes{URL: m.URL + "/webhook", Active: true}
	} else {
		// GitHub wants a URL even for an inactive webhook; it is replaced once the App is deployed.
		m.HookAttributes = HookAttributes{URL: homepage, Active: false}
	}
	sort.Strings(m.DefaultEvents)
	return m, nil
}

// NewAppURL is the GitHub page that takes a manifest: the user's "new App" form, or the
// organization's. githubURL is GitHub's web address (https://github.com, or GitHub Enterprise
// Server's); state comes back with the redirect.
func NewAppURL(githubURL, org, state string) (string, error) {
	base, err := url.Parse(strings.TrimSuffix(githubURL, "/"))
	if err != nil || base.Host == "" || (base.Scheme != "https" && base.Scheme != "http") {
		return "", fmt.Errorf("GitHub URL %q: want such as https://github.com", githubURL)
	}
	if org != "" {
		base.Path += "/organizations/" + url.PathEscape(org) + "/settings/apps/new"
	} else {
		base.Path += "/settings/apps/new"
	}
	base.RawQuery = url.Values{"state": {state}}.Encode()
	return base.String(), nil
}
