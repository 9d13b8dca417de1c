package appmanifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/latestwins/latestwins/internal/githubapp"
)

// Credentials is the file WriteCredentials writes: what the App's deployment needs, as JSON.
type Credentials struct {
	AppID         int64  `json:"app_id"`
	Slug          string `json:"slug"`
	Owner         string `json:"owner"`
	HTMLURL       string `json:"html_url"`
	WebhookSecret string `json:"webhook_secret"`
	PrivateKey    string `json:"private_key"`
	ClientID      string `json:"client_id"`
	ClientSecret  string `json:"client_secret"`
}

// WriteCredentials writes the App's credentials to path, readable by its owner only (mode 0600). It
// never replaces an existing file: the credentials of another App may be there.
func WriteCredentials(path string, app githubapp.NewApp) error {
	b, err := json.MarshalIndent(Credentials{
		AppID: app.ID, Slug: app.Slug, Owner: app.Owner, HTMLURL: app.HTMLURL, WebhookSecret: app.WebhookSecret,
		PrivateKey: app.PrivateKey, ClientID: app.ClientID, ClientSecret: app.ClientSecret,
	}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the App's credentials: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("write the App's credentials: %s exists; move it away or give another --out", path)
	}
	if err != nil {
		return fmt.Errorf("write the App's credentials: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write the App's credentials to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write the App's credentials to %s: %w", path, err)
	}
	return nil
}

// SSMParameters names the SecureString parameters the Lambda function reads (docs/deploy.md).
type SSMParameters struct {
	WebhookSecret string // default /latestwins/webhook-secret
	PrivateKey    string // default /latestwins/app-private-key
	Region        string // optional --region
}

// WriteSSMCommands writes the shell commands that put the App's secrets into SSM Parameter Store,
// with the values quoted for sh, and the App id the stack takes.
func WriteSSMCommands(w io.Writer, app githubapp.NewApp, p SSMParameters) error {
	if p.WebhookSecret == "" {
		p.WebhookSecret = "/latestwins/webhook-secret"
	}
	if p.PrivateKey == "" {
		p.PrivateKey = "/latestwins/app-private-key"
	}
	region := ""
	if p.Region != "" {
		region = " --region " + shellQuote(p.Region)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# The %s App (id %d): put its secrets where the Lambda function reads them.\n", app.Slug, app.ID)
	if app.WebhookSecret == "" {
		fmt.Fprintf(&b, "# GitHub returned no webhook secret (the webhook is inactive): set one on %s and put it in %s.\n", app.HTMLURL, p.WebhookSecret)
	} else {
		fmt.Fprintf(&b, "aws ssm put-parameter%s --overwrite --type SecureString --name %s --value=%s\n", region, shellQuote(p.WebhookSecret), shellQuote(app.WebhookSecret))
	}
	// --value= keeps the CLI from reading a PEM's leading dashes as an option. A PEM key with its header
	// is near the 4 KB limit of the standard tier.
	fmt.Fprintf(&b, "aws ssm put-parameter%s --overwrite --type SecureString --tier Advanced --name %s --value=%s\n", region, shellQuote(p.PrivateKey), shellQuote(app.PrivateKey))
	fmt.Fprintf(&b, "# The stack's App id: AppId=%d (CloudFormation), app_id = %q (Terraform).\n", app.ID, fmt.Sprint(app.ID))
	_, err := io.WriteString(w, b.String())
	return err
}

// shellQuote quotes s for sh: single quotes, each inner single quote closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
