package dynamo

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Scheme is the URL scheme of a DynamoDB store: dynamodb://TABLE?region=R&endpoint=URL.
const Scheme = "dynamodb"

var (
	tableNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)
	regionRE    = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)
)

// Target is what a store URL names.
type Target struct {
	Table    string
	Region   string // empty: from the AWS configuration chain
	Endpoint string // empty: the service's endpoint for the region
}

// ParseURL reads dynamodb://TABLE?region=R&endpoint=URL. Region and endpoint are optional; the
// endpoint serves local DynamoDB-compatible servers such as dynalite.
func ParseURL(raw string) (Target, error) {
	const form = "dynamodb://TABLE?region=R&endpoint=URL"
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, fmt.Errorf("store URL %q: %w (expected %s)", raw, err, form)
	}
	if u.Scheme != Scheme {
		return Target{}, fmt.Errorf("store URL %q: scheme %q is not %q (expected %s)", raw, u.Scheme, Scheme, form)
	}
	if u.Opaque != "" || u.Host == "" {
		return Target{}, fmt.Errorf("store URL %q names no table (expected %s)", raw, form)
	}
	if u.User != nil {
		return Target{}, fmt.Errorf("store URL %q: credentials do not belong in the URL; use the AWS configuration (environment, profile or role)", raw)
	}
	if !tableNameRE.MatchString(u.Host) {
		return Target{}, fmt.Errorf("store URL %q: table name %q is invalid: use 3-255 characters from A-Z a-z 0-9 _ . -", raw, u.Host)
	}
	if u.Path != "" && u.Path != "/" {
		return Target{}, fmt.Errorf("store URL %q: unexpected path %q after the table name (expected %s)", raw, u.Path, form)
	}
	if u.Fragment != "" {
		return Target{}, fmt.Errorf("store URL %q: unexpected fragment %q (expected %s)", raw, u.Fragment, form)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Target{}, fmt.Errorf("store URL %q: query: %w", raw, err)
	}
	t := Target{Table: u.Host}
	for _, k := range sortedQueryKeys(q) {
		v := q[k]
		if len(v) != 1 {
			return Target{}, fmt.Errorf("store URL %q: %s is given %d times", raw, k, len(v))
		}
		switch k {
		case "region":
			if !regionRE.MatchString(v[0]) {
				return Target{}, fmt.Errorf("store URL %q: region %q is invalid (e.g. region=eu-west-1)", raw, v[0])
			}
			t.Region = v[0]
		case "endpoint":
			ep, err := url.Parse(v[0])
			if err != nil || !slices.Contains([]string{"http", "https"}, ep.Scheme) || ep.Host == "" {
				return Target{}, fmt.Errorf("store URL %q: endpoint %q is not an http(s) URL (e.g. endpoint=http://127.0.0.1:4567)", raw, v[0])
			}
			t.Endpoint = v[0]
		default:
			return Target{}, fmt.Errorf("store URL %q: unknown parameter %q (known: region, endpoint)", raw, k)
		}
	}
	return t, nil
}

func sortedQueryKeys(q url.Values) []string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Open returns a Store for a dynamodb:// URL. The client comes from the AWS configuration chain
// (environment, shared files, role), with the URL's region and endpoint taking precedence. It makes
// no request; run Migrate to create or check the table.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	t, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var load []func(*config.LoadOptions) error
	if t.Region != "" {
		load = append(load, config.WithRegion(t.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("open %s: load AWS configuration: %w", strings.SplitN(rawURL, "?", 2)[0], err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("open %s: no AWS region: add ?region=R to the store URL or set AWS_REGION", strings.SplitN(rawURL, "?", 2)[0])
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if t.Endpoint != "" {
			o.BaseEndpoint = aws.String(t.Endpoint)
		}
	})
	return New(client, t.Table, opts...), nil
}
