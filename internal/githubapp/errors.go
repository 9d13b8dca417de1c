package githubapp

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/go-github/v60/github"
)

// ErrNotFound is the category of *NotFoundError.
var ErrNotFound = errors.New("not found on GitHub")

// NotFoundError says that a file (or the repository, or the ref) does not exist, or is not visible to
// the credentials in use: GitHub answers 404 to both.
type NotFoundError struct {
	Owner, Repo, Path, Ref string
	Err                    error
}

func (e *NotFoundError) Error() string {
	ref := e.Ref
	if ref == "" {
		ref = "the default branch"
	}
	return fmt.Sprintf("%s/%s: %s at %s not found (or not readable with these credentials)", e.Owner, e.Repo, e.Path, ref)
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

func (e *NotFoundError) Unwrap() error { return e.Err }

// RateLimitedError is a request GitHub refused because a rate limit was hit. It unwraps to go-github's
// *github.RateLimitError (the primary limit), *github.AbuseRateLimitError (a secondary limit) or, for
// a 429 answer, *github.ErrorResponse.
type RateLimitedError struct {
	Op string
	// Secondary is true for secondary (abuse) limits, false for the hourly primary limit.
	Secondary bool
	// RetryAfter is how long to wait before trying again, at least one second.
	RetryAfter time.Duration
	Err        error
}

func (e *RateLimitedError) Error() string {
	kind := "primary"
	if e.Secondary {
		kind = "secondary"
	}
	return fmt.Sprintf("%s: GitHub %s rate limit exceeded, retry after %s: %v", e.Op, kind, e.RetryAfter, e.Err)
}

func (e *RateLimitedError) Unwrap() error { return e.Err }

// RetryDelay is how long to wait before trying again.
func (e *RateLimitedError) RetryDelay() time.Duration { return e.RetryAfter }

// secondaryDefault is GitHub's advice when a secondary limit comes without Retry-After: wait at least
// a minute.
const secondaryDefault = time.Minute

// rateLimited returns a *RateLimitedError when err is a rate limit, nil otherwise.
func (c *Client) rateLimited(op string, err error) *RateLimitedError {
	var primary *github.RateLimitError
	if errors.As(err, &primary) {
		return &RateLimitedError{Op: op, RetryAfter: atLeastASecond(primary.Rate.Reset.Time.Sub(c.now())), Err: err}
	}
	var secondary *github.AbuseRateLimitError
	if errors.As(err, &secondary) {
		wait := secondaryDefault
		if secondary.RetryAfter != nil {
			wait = *secondary.RetryAfter
		}
		return &RateLimitedError{Op: op, Secondary: true, RetryAfter: atLeastASecond(wait), Err: err}
	}
	var resp *github.ErrorResponse
	if errors.As(err, &resp) && resp.Response != nil && resp.Response.StatusCode == http.StatusTooManyRequests {
		wait := secondaryDefault
		if s, convErr := strconv.Atoi(resp.Response.Header.Get("Retry-After")); convErr == nil {
			wait = time.Duration(s) * time.Second
		} else if reset, convErr := strconv.ParseInt(resp.Response.Header.Get("X-RateLimit-Reset"), 10, 64); convErr == nil {
			wait = time.Unix(reset, 0).Sub(c.now())
		}
		return &RateLimitedError{Op: op, Secondary: resp.Response.Header.Get("X-RateLimit-Remaining") != "0", RetryAfter: atLeastASecond(wait), Err: err}
	}
	return nil
}

func atLeastASecond(d time.Duration) time.Duration {
	d = (d + time.Second - 1).Truncate(time.Second) // whole seconds, rounded up
	if d < time.Second {
		return time.Second
	}
	return d
}
