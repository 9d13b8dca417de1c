package cli

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/internal/appmanifest"
	"github.com/latestwins/latestwins/internal/githubapp"
)

// runApp is `latestwins app create`: it registers the GitHub App with GitHub's manifest flow and
// hands over its credentials (internal/appmanifest).
func runApp(ctx context.Context, c *cmdEnv, args []string) error {
	if len(args) == 0 || args[0] != "create" {
		return usageErrorf("app takes one subcommand: app create [--org ORG] [--url PUBLIC_URL] [--out FILE | --ssm]")
	}
	fs := flag.NewFlagSet("latestwins app create", flag.ContinueOnError)
	var opts appmanifest.Options
	var out, listen, githubURL, apiURL, webhookParam, keyParam, region string
	var ssm bool
	fs.StringVar(&opts.Org, "org", "", "register the App under this organization (default: your own account)")
	fs.StringVar(&opts.PublicURL, "url", "", "the App's public base URL (Lambda Function URL, or serve's); the webhook is URL/webhook. Empty: the webhook starts inactive")
	fs.StringVar(&opts.Name, "name", "latestwins", "the App's name, unique on GitHub")
	fs.BoolVar(&opts.Public, "public", false, "let other accounts install the App")
	fs.StringVar(&out, "out", "latestwins-app.json", "file for the App's id, private key and webhook secret (mode 0600; never overwritten)")
	fs.BoolVar(&ssm, "ssm", false, "print the aws ssm put-parameter commands for the secrets instead of writing --out")
	fs.StringVar(&webhookParam, "webhook-secret-parameter", "/latestwins/webhook-secret", "with --ssm: the webhook secret's parameter")
	fs.StringVar(&keyParam, "private-key-parameter", "/latestwins/app-private-key", "with --ssm: the private key's parameter")
	fs.StringVar(&region, "region", "", "with --ssm: the AWS region of the parameters (default: the AWS CLI's)")
	fs.StringVar(&listen, "listen", "127.0.0.1:0", "the local page's address (loopback only)")
	fs.StringVar(&githubURL, "github-url", "https://github.com", "GitHub's web address (GitHub Enterprise Server: https://HOST)")
	fs.StringVar(&apiURL, "api-url", githubapp.DefaultAPIURL, "GitHub's REST API (GitHub Enterprise Server: https://HOST/api/v3)")
	if err := parseFlagSet(fs, c.io.Stderr, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("app create takes no arguments, got %q", fs.Args())
	}
	base, err := url.Parse(strings.TrimSuffix(apiURL, "/") + "/")
	if err != nil || base.Host == "" {
		return usageErrorf("--api-url %q: want such as %s", apiURL, githubapp.DefaultAPIURL)
	}
	gh := github.NewClient(&http.Client{Timeout: 30 * time.Second})
	gh.BaseURL, gh.UploadURL = base, base

	flow := &appmanifest.Flow{
		Options: opts, GitHubURL: githubURL, Listen: listen, Converter: githubapp.New(gh),
		Ready: func(page string) {
			fmt.Fprintf(c.io.Stderr, "Open %s in a browser signed in to GitHub: it sends the App's manifest to GitHub, and GitHub brings you back here.\nWaiting (Ctrl-C to give up)...\n", page)
		},
	}
	if _, err := appmanifest.New(opts, "http://127.0.0.1/callback"); err != nil {
		return usageErrorf("%v", err)
	}
	app, err := flow.Run(ctx)
	if err != nil {
		return err
	}
	if ssm {
		if err := appmanifest.WriteSSMCommands(c.io.Stdout, app, appmanifest.SSMParameters{WebhookSecret: webhookParam, PrivateKey: keyParam, Region: region}); err != nil {
			return fmt.Errorf("print the SSM commands: %w", err)
		}
	} else if err := appmanifest.WriteCredentials(out, app); err != nil {
		return err
	}
	fmt.Fprintf(c.io.Stderr, "Registered the App %s (id %d).\n", app.Slug, app.ID)
	if !ssm {
		fmt.Fprintf(c.io.Stderr, "Its id, private key and webhook secret are in %s (readable by you only).\n", out)
	}
	if opts.PublicURL == "" {
		fmt.Fprintf(c.io.Stderr, "Its webhook is inactive: once the App runs, set its URL (.../webhook) and activate it on %s.\n", app.HTMLURL)
	}
	fmt.Fprintf(c.io.Stderr, "Install it on the repositories it deploys for: %s/installations/new\n", app.HTMLURL)
	return nil
}
