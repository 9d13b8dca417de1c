package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// maxWebhookAnswer is how much of the App's answer webhook send reads and prints.
const maxWebhookAnswer = 1 << 20

// runWebhook is `latestwins webhook send`: it signs a payload file as GitHub signs webhooks
// (X-Hub-Signature-256, HMAC-SHA256 of the body with the App's webhook secret) and sends it to the
// App, so that a delivery can be tried without GitHub and without openssl.
func runWebhook(ctx context.Context, c *cmdEnv, args []string) error {
	if len(args) == 0 || args[0] != "send" {
		return usageErrorf("webhook takes one subcommand: webhook send --event EVENT FILE --url URL")
	}
	var event, target, delivery, secret string
	c.newFlags("webhook send")
	c.interspersed = true
	c.str(&event, "event", "", "the event the payload is of, sent as X-GitHub-Event: push, pull_request, ... (required)")
	c.str(&target, "url", "", "the App's webhook address, http or https, e.g. http://127.0.0.1:8080/webhook (required)")
	c.str(&delivery, "delivery", "", "the delivery id, sent as X-GitHub-Delivery (default: a fresh one)")
	c.secret(&secret, "webhook-secret", "the App's webhook secret the payload is signed with (prefer the variable: flags show in process lists)")
	if err := c.parse(args[1:]); err != nil {
		return err
	}
	if len(c.positional) != 1 {
		return usageErrorf("name one payload file: latestwins webhook send --event push FILE --url URL")
	}
	if event = strings.TrimSpace(event); event == "" {
		return c.badSetting("event", "", "name the payload's event, e.g. --event push")
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c.badSetting("url", target, "give the App's webhook address as http:// or https://, e.g. http://127.0.0.1:8080/webhook")
	}
	if secret == "" {
		return c.badSetting("webhook-secret", "", "give the App's webhook secret: LATESTWINS_WEBHOOK_SECRET, the variable serve reads")
	}
	body, err := os.ReadFile(c.positional[0])
	if err != nil {
		return usageCause(err, "cannot read the payload: %v", err)
	}
	if delivery == "" {
		delivery = newDeliveryID()
	}
	resp, answer, err := sendSigned(ctx, u, event, delivery, secret, body)
	if err != nil {
		return err
	}
	c.progress("%s delivery %s to %s: %s", event, delivery, u.Redacted(), resp.Status)
	sc := bufio.NewScanner(bytes.NewReader(answer))
	sc.Buffer(make([]byte, 0, 64*1024), maxWebhookAnswer)
	for sc.Scan() {
		c.printf("%s\n", sc.Text())
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		// The delivery itself is wrong (the secret, the event, the payload): sending it again cannot help.
		return &exitError{code: ExitUsage, msg: fmt.Sprintf("the App refused delivery %s: %s", delivery, resp.Status)}
	}
	return &exitError{code: ExitError, msg: fmt.Sprintf("the App did not take delivery %s: %s", delivery, resp.Status)}
}

// sendSigned posts body to target as GitHub posts a webhook delivery of event: as JSON, with its
// delivery id, signed with secret (X-Hub-Signature-256: the HMAC-SHA256 of the body). It returns the
// App's answer and up to maxWebhookAnswer bytes of its body (the body is closed). A redirect is
// not followed: the App's own answer is the one wanted.
func sendSigned(ctx context.Context, target *url.URL, event, delivery, secret string, body []byte) (*http.Response, []byte, error) {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("User-Agent", "latestwins-webhook-send")
	resp, err := noRedirects.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("send %s delivery %s to %s: %w", event, delivery, target.Redacted(), err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxWebhookAnswer))
	if err != nil {
		return nil, nil, fmt.Errorf("read the answer to %s delivery %s: %w", event, delivery, err)
	}
	return resp, answer, nil
}

// noRedirects is the client of webhook send and doctor: a redirect would resend a payload
// elsewhere, or drop it, and would hide which address answered.
var noRedirects = &http.Client{Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// newDeliveryID is a fresh delivery id, shaped like GitHub's (a UUID).
func newDeliveryID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
