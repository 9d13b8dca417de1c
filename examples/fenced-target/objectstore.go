package fencedtarget

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Pointer is the object a deploy publishes: which release is live, and the fencing token of the
// deploy that made it live.
type Pointer struct {
	Release string `json:"release"`
	Token   int64  `json:"token"`
}

// ObjectStore publishes a Pointer as one object of an HTTP object store with conditional writes:
// GET answers the object and its ETag (404 when there is none); PUT with If-Match: ETAG replaces it
// only if it is unchanged, and PUT with If-None-Match: * creates it only if there is none; a failed
// condition is 412 Precondition Failed. S3, GCS and Azure Blob Storage all offer these.
type ObjectStore struct {
	Client *http.Client
	URL    string // the object's URL
	// Attempts bounds the re-reads after a lost race (default 5).
	Attempts int
}

// Publish makes p the live pointer unless the object holds a newer token: a write that carries a
// smaller token than the stored one is refused with a *StaleError, and so is one that loses a race
// to a newer writer (the conditional write fails, the re-read shows the newer token).
func (s *ObjectStore) Publish(ctx context.Context, p Pointer) error {
	attempts := s.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode the pointer: %w", err)
	}
	for range attempts {
		cur, etag, err := s.get(ctx)
		if err != nil {
			return err
		}
		if cur != nil && cur.Token > p.Token {
			return &StaleError{Held: cur.Token, Mine: p.Token}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.URL, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("publish %s: %w", s.URL, err)
		}
		req.Header.Set("Content-Type", "application/json")
		if cur == nil {
			req.Header.Set("If-None-Match", "*")
		} else {
			req.Header.Set("If-Match", etag)
		}
		resp, err := s.Client.Do(req)
		if err != nil {
			return fmt.Errorf("publish %s: %w", s.URL, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusPreconditionFailed:
			continue // someone wrote in between: read again
		case resp.StatusCode/100 == 2:
			return nil
		default:
			return fmt.Errorf("publish %s: %s", s.URL, resp.Status)
		}
	}
	return fmt.Errorf("publish %s: the object kept changing over %d attempts", s.URL, attempts)
}

func (s *ObjectStore) get(ctx context.Context) (*Pointer, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", s.URL, err)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", s.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, "", nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("read %s: %s", s.URL, resp.Status)
	}
	var p Pointer
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		return nil, "", fmt.Errorf("read %s: %w", s.URL, err)
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		return nil, "", errors.New("read " + s.URL + ": no ETag: the store cannot make conditional writes")
	}
	return &p, etag, nil
}
